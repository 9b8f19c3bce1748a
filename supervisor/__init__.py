"""Shepherd: an always-on supervisor for GRPO runs on Slurm + Ray; `ls` this folder to see its pipeline."""
