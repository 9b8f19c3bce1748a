"""Our ray.sub's port block: the job id picks one of 127 blocks, and a block where something on the node
already listens (another job's Ray, 127 ids away) is passed over, so two jobs on a node never share ports."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

RAY_SUB = Path(__file__).resolve().parents[2] / "supervisor" / "slurm" / "launchers" / "ray.sub"


def block_for(slot: int) -> int:
    """free_port_block SLOT as ray.sub runs it (its functions, sourced from the script itself)."""
    script = f"""
        source <(sed -n '/^listening_ports()/,/^use_port_block()/p' {RAY_SUB} | head -n -1)
        free_port_block {slot}
    """
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True, timeout=30)
    return int(out.stdout.strip())


def free_slot() -> int:
    """A block in which nothing listens now, nor in the next one."""
    for slot in range(127):
        if block_for(slot) == 20000 + slot * 100 and block_for(slot + 1) == 20100 + slot * 100:
            return slot
    raise AssertionError("every port block of 20000-32699 is in use on this machine")


def test_a_free_block_is_the_job_ids_own() -> None:
    slot = free_slot()
    assert block_for(slot) == 20000 + slot * 100


def test_a_block_where_something_listens_is_passed_over_for_the_next() -> None:
    slot = free_slot()
    with socket.socket() as other_jobs_ray:
        other_jobs_ray.bind(("0.0.0.0", 20000 + slot * 100 + 42))
        other_jobs_ray.listen()
        assert block_for(slot) == 20000 + (slot + 1) * 100
    assert block_for(slot) == 20000 + slot * 100
