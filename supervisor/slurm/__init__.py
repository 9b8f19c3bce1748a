"""Slurm as data: argv in, typed observations out; the sbatch request, reconciliation by tag, launchers."""
