"""Gather the facts preflight judges, never for longer than its time bound, and judge them.

A stat on a hung NFS mount can block for minutes in uninterruptible sleep, so the paths are probed in a worker
thread that is abandoned (not waited for) when the bound passes; what was not probed in time becomes a
warning. `sbatch --test-only` is one real Slurm call through the client, with what is left of the bound as its
timeout.
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Sequence
from pathlib import Path

import anyio
import anyio.to_thread

from supervisor.domain.overrides import AttemptOverrides
from supervisor.domain.spec import JobSpec
from supervisor.preflight.checks import (
    Need,
    PathFacts,
    Problem,
    judge_path,
    judge_sbatch,
    needs,
    warning,
)
from supervisor.slurm.client import SlurmClient, SlurmRejected, SlurmUnavailable
from supervisor.slurm.submit import build_submit_request
from supervisor.watch.fswatch import detect_fs, existing_ancestor


def probe(need: Need) -> PathFacts:
    """What is at `need.path` (stat, access, a real create for writability, a model dir's listing)."""
    p = need.path
    try:
        exists = p.exists()
        is_dir = p.is_dir()
        fs = detect_fs(p)
        readable = os.access(p, os.R_OK) if exists else False
        writable = _can_create(p if exists and is_dir else existing_ancestor(p)) if need.writable else None
        listing = tuple(sorted(os.listdir(p))) if need.model and is_dir else None
    except OSError as exc:
        return PathFacts(False, False, "unknown", False, False, error=str(exc))
    return PathFacts(exists, is_dir, fs.name, fs.shared, readable, writable, listing)


def _can_create(folder: Path) -> bool:
    """A real create and unlink: `access(W_OK)` is wrong on NFS with root squash or ACLs."""
    test = folder / f".shepherd-preflight-{secrets.token_hex(4)}"
    try:
        test.touch(exist_ok=False)
    except OSError:
        return False
    try:
        test.unlink()
    except OSError:
        pass
    return True


async def run_preflight(
    spec: JobSpec,
    *,
    slurm: SlurmClient | None,
    timeout_s: float,
    shared_paths: Sequence[Path] = (),
    run_dir: Path | None = None,
    skip: Sequence[str] = (),
) -> list[Problem]:
    """Every problem found within `timeout_s`; `slurm` None (or "sbatch" skipped) asks Slurm nothing."""
    skipped = frozenset([*skip, *spec.preflight.skip])
    if "all" in skipped:
        return []
    deadline = time.monotonic() + timeout_s
    wanted = needs(spec)
    found: dict[int, PathFacts] = {}

    def probe_all() -> None:
        for i, need in enumerate(wanted):
            if time.monotonic() > deadline:
                return
            found[i] = probe(need)

    problems: list[Problem] = []
    with anyio.move_on_after(timeout_s):
        await anyio.to_thread.run_sync(probe_all, abandon_on_cancel=True)
    for i, need in enumerate(wanted):
        facts = found.get(i)
        if facts is None:
            problems.append(warning(need.field, f"{need.path} not checked: no answer within {timeout_s:g} s"))
        else:
            problems += judge_path(need, facts, shared_paths, skipped)
    if slurm is not None and "sbatch" not in skipped:
        problems += await _test_only(spec, slurm, deadline, run_dir)
    return problems


async def _test_only(
    spec: JobSpec, slurm: SlurmClient, deadline: float, run_dir: Path | None
) -> list[Problem]:
    left = deadline - time.monotonic()
    if left < 0.5:
        return [warning("slurm", "sbatch --test-only not asked: the time for preflight ran out")]
    req = build_submit_request(
        spec, run_id="preflight", attempt=1, run_dir=run_dir or Path("/tmp"), overrides=AttemptOverrides()
    )
    if spec.workdir is not None and not spec.workdir.is_dir():
        return []  # the missing workdir is reported already; sbatch would only repeat it
    saved = slurm.timeout_s
    slurm.timeout_s = min(saved, left)
    try:
        await slurm.test_only(req)
    except SlurmRejected as exc:
        return [judge_sbatch(str(exc).split(": ", 1)[-1])]
    except SlurmUnavailable as exc:
        return [warning("slurm", f"sbatch --test-only could not ask Slurm: {exc}")]
    finally:
        slurm.timeout_s = saved
    return []
