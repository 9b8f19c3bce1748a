"""Taking over a job someone submitted by hand (`COMMAND=... sbatch ray.sub`), without restarting it: it
becomes attempt 1 of a new run, watched, judged by the rules and resumed with the spec like any other.

Attempt 2 runs the spec's command, not the job's: where the launcher records the job's own command (main's
ray.sub writes `<jobid>-logs/driver_command.sh`), the two are compared at adoption and every difference is
said (and kept in the run's history) before it can matter; where it records none, that is said instead."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from supervisor.domain.changes import DRIVER_COMMAND_FILE, command_differences, recorded_command
from supervisor.domain.jobstate import JobState
from supervisor.domain.runs import RunRow
from supervisor.domain.spec import JobSpec
from supervisor.intake.queue import new_run_id
from supervisor.ports import ControlError
from supervisor.settings import Settings
from supervisor.slurm.client import SlurmClient
from supervisor.slurm.launchers import layout
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


def command_notes(log_base: str | None, job_id: str, state: JobState, spec: JobSpec) -> list[str]:
    """What a person must know about the adopted job's command against the spec's, before attempt 2 runs the
    spec's: each difference, or why they could not be compared ([] when they match)."""
    folder = layout.current_log_dir(Path(log_base), job_id) if log_base else None
    try:
        text = (folder / DRIVER_COMMAND_FILE).read_text(errors="replace") if folder else None
    except OSError:
        text = None
    if text is None:
        if state == JobState.PENDING:
            return [
                f"cannot compare job {job_id}'s command with the spec yet: it has not started (its launcher "
                f"records it in {job_id}-logs/{DRIVER_COMMAND_FILE} then); attempt 2 runs the spec's command"
            ]
        return [
            f"cannot compare job {job_id}'s command with the spec: its launcher recorded none (NeMo RL "
            f"v0.6.0's ray.sub writes no {DRIVER_COMMAND_FILE}); attempt 2 runs the spec's command"
        ]
    words = recorded_command(text)
    if words is None:
        return [
            f"cannot compare job {job_id}'s command with the spec: {DRIVER_COMMAND_FILE} is not one command"
        ]
    return [
        f"job {job_id} differs from the spec, whose command attempt 2 runs: {d}"
        for d in command_differences(words, spec)
    ]


async def adopt(
    store: Store,
    slurm: SlurmClient,
    settings: Settings,
    job_id: str,
    spec: JobSpec,
    spec_file: Path,
    *,
    clock: Callable[[], float] = time.time,
) -> tuple[RunRow, list[str]]:
    """Attempt 1 of a new run is the running (or pending) job `job_id`, and what differs between its command
    and the spec's (recorded in the run's history); refused with the reason otherwise."""
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
    run = store.adopt_run(
        run_id,
        spec.name,
        spec.model_dump_json(),
        str(run_dir / "spec.yaml"),
        job_id=job_id,
        tag=adopted_tag(job_id),
        record=record,
    )
    notes = command_notes(record["log_base"], job_id, state, spec)
    for note in notes:
        store.add_event(run.id, 1, "adopted-command", note, {"job_id": job_id})
    return run, notes
