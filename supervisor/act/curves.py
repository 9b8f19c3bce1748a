"""A run's curves for a picture (Slack, `shepherd plot`), from wherever its metrics are: the trainer's
exp dirs, else the driver logs of its attempts, oldest first."""

from __future__ import annotations

from pathlib import Path

from supervisor.domain.runs import RunRow
from supervisor.slurm.launchers import layout
from supervisor.slurm.submit import base_log_dir
from supervisor.store import Store
from supervisor.watch.sources import Point, metric_points


def driver_logs(store: Store, runs_dir: Path, run: RunRow) -> list[Path]:
    base = base_log_dir(run.spec, runs_dir / run.id)
    return [
        d / layout.DRIVER_LOG
        for a in store.attempts(run.id)
        if a.job_id
        for d in layout.log_dirs(base, a.job_id)
    ]


def run_points(store: Store, runs_dir: Path, run: RunRow) -> list[Point]:
    return metric_points(run.spec.trainer_log_dir, driver_logs(store, runs_dir, run))
