"""Taking over a job someone submitted by hand (`COMMAND=... sbatch ray.sub`), without restarting it: it
becomes attempt 1 of a new run, watched, judged by the rules and resumed with the spec like any other."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from supervisor.domain.runs import RunRow
from supervisor.domain.spec import JobSpec
from supervisor.intake.queue import new_run_id
from supervisor.ports import ControlError
from supervisor.settings import Settings
from supervisor.slurm.client import SlurmClient
from supervisor.slurm.parse import parse_state
from supervisor.slurm.reconcile import adopted_tag
from supervisor.store import Store


def job_record(fields: dict[str, str], spec: JobSpec) -> dict[str, Any]:
    """Where an adopted job writes, from `scontrol show job`: its output file, and the base of its log
    folders (the spec's `log_dir`, else the dir it was submitted from: ray.sub's default BASE_LOG_DIR)."""
    out = fields.get("StdOut") or ""
    work = fields.get("WorkDir") or ""
    base = str(spec.log_dir) if spec.log_dir is not None else work
    return {"adopted": True, "output": out or None, "log_base": base or None, "reason": "adopted"}


async def adopt(
    store: Store,
    slurm: SlurmClient,
    settings: Settings,
    job_id: str,
    spec: JobSpec,
    spec_file: Path,
    *,
    clock: Callable[[], float] = time.time,
) -> RunRow:
    """Attempt 1 of a new run is the running (or pending) job `job_id`; refused with the reason otherwise."""
    if not job_id.isdigit():
        raise ControlError(f"{job_id!r} is not a Slurm job id")
    taken = [a for r in store.list_runs() for a in store.attempts(r.id) if a.job_id == job_id]
    if taken:
        raise ControlError(f"job {job_id} is already attempt {taken[0].n} of run {taken[0].run_id}")
    fields = await slurm.show_job(job_id)
    state = parse_state(fields.get("JobState", ""))
    if not state.is_active:
        raise ControlError(
            f"job {job_id} is {fields.get('JobState', 'unknown')}: only a live job can be adopted"
        )
    run_id = new_run_id(spec.name, clock())
    run_dir = settings.runs_dir / run_id
    run_dir.mkdir(parents=True)
    shutil.copyfile(spec_file, run_dir / "spec.yaml")
    record = job_record(fields, spec)
    return store.adopt_run(
        run_id,
        spec.name,
        spec.model_dump_json(),
        str(run_dir / "spec.yaml"),
        job_id=job_id,
        tag=adopted_tag(job_id),
        record=record,
    )
