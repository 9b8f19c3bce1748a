"""NeMo RL's own ray.sub, unmodified: the driver goes in `COMMAND` (positional arguments are ignored), every
step runs in a pyxis container (`CONTAINER`, `MOUNTS` must be set), `GPUS_PER_NODE` must match the
partition's GRES, and ENDED means the Ray bring-up failed (../shared/reference/nemo-rl-facts.md)."""

from __future__ import annotations

from supervisor.slurm.launchers.layout import FileContract

# ray.sub's refusals are `echo "Error: ..." >&2` (main and v0.6.0): GPUS_PER_NODE against the GRES, CPUTot,
# DEDICATED_RAY_HEAD; its set -x trace shows the same text after `+ echo`, which stays blanked.
CONTRACT = FileContract(
    name="nemo-rl",
    ended="bring-up-failed",
    driver_exit_line=False,
    output_is_trace=True,
    verdicts=("Error: ",),
)


def env(command: str, image: str, mounts: list[str], gpus_per_node: int) -> dict[str, str]:
    """What the script reads from the environment sbatch exports (`--export=ALL`)."""
    return {
        "COMMAND": command,
        "CONTAINER": image,
        "MOUNTS": ",".join(mounts),
        "GPUS_PER_NODE": str(gpus_per_node),
    }
