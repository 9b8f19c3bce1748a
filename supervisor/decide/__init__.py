"""Pure decisions: what a match does, whether to resume, which checkpoint, how a Slurm update moves a run."""
