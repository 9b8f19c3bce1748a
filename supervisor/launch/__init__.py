"""Launch scripts shipped as package data (ray.sub), located so the Slurm client can hand them to sbatch."""

from __future__ import annotations

from pathlib import Path

RAY_SUB_NAME = "ray.sub"

# Exit code ray.sub uses when the Ray cluster never came up (the driver did not run); override with
# RAY_STARTUP_EXIT_CODE in the job's environment.
RAY_STARTUP_EXIT_CODE = 97


def ray_sub_path() -> Path:
    """Absolute path of ray.sub; sbatch copies the script at submit time, so an installed path is fine."""
    path = Path(__file__).resolve().parent / RAY_SUB_NAME
    if not path.is_file():
        raise FileNotFoundError(f"{RAY_SUB_NAME} is missing next to {__file__}")
    return path


def ray_sub_argv(driver: list[str] | str) -> list[str]:
    """sbatch's trailing argv for a driver: a list runs as is, a string command runs through `bash -c`."""
    if isinstance(driver, str):
        return [str(ray_sub_path()), "bash", "-c", driver]
    if not driver:
        raise ValueError("empty driver command")
    return [str(ray_sub_path()), *driver]
