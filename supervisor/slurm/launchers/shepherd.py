"""Our own ray.sub: the driver is its argv, each job gets its own Ray ports and temp dir, and ENDED is
written when the driver exits (after a `driver exited with code N` line in Slurm's output file)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from supervisor.slurm.launchers.layout import FileContract

CONTRACT = FileContract(name="shepherd", ended="driver-exited", driver_exit_line=True, output_is_trace=False)


def script() -> Path:
    """The ray.sub shipped in the package (sbatch copies it at submit time: an installed path is fine)."""
    return Path(str(resources.files("supervisor.slurm.launchers") / "ray.sub"))


def options(cpus: int) -> list[str]:
    """One task per node holding the node's CPUs; the script starts Ray in it."""
    return ["--ntasks-per-node=1", f"--cpus-per-task={cpus}"]
