"""Where a run's metrics come from, chosen in one place: its trainer's `exp_NNN/metrics.jsonl` (ours),
else its TensorBoard event files (NeMo RL with TensorBoard on), else its driver log's printed results
(NeMo RL with TensorBoard off). The monitor asks this for live reading, plots for a run's history.

Each launch writes a new `exp_NNN/`; a resumed run repeats steps after its checkpoint, so for a history
the later launch's value of a step wins.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from supervisor.domain.trainer_files import METRICS_FILE, TENSORBOARD_DIR
from supervisor.watch import driver_log
from supervisor.watch.metric_names import canonical
from supervisor.watch.metrics import MetricsReader
from supervisor.watch.tbevents import exp_dirs, newest_exp_dir, read_exp_scalars

MetricSource = Literal["metrics.jsonl", "tensorboard", "driver-log"]
Point = tuple[str, int, float]


def metric_source(trainer_log_dir: Path | None) -> MetricSource:
    """What the live launch writes its scalars to (metrics.jsonl wins: a trainer writing both logs twice)."""
    exp = newest_exp_dir(trainer_log_dir) if trainer_log_dir is not None else None
    if exp is not None and (exp / METRICS_FILE).is_file():
        return "metrics.jsonl"
    if exp is not None and (exp / TENSORBOARD_DIR).is_dir():
        return "tensorboard"
    return "driver-log"


def _exp_points(exp: Path) -> list[Point]:
    jsonl = exp / METRICS_FILE
    if jsonl.is_file():
        rows = MetricsReader(jsonl).read().rows
        return [(canonical("metrics.jsonl", tag), r.step, v) for r in rows for tag, v in r.values.items()]
    return [(canonical("tensorboard", s.tag), s.step, s.value) for s in read_exp_scalars(exp)]


def metric_points(trainer_log_dir: Path | None, driver_logs: Sequence[Path] = ()) -> list[Point]:
    """A run's whole history: every launch's exp dir, oldest first, else its attempts' driver logs."""
    points: list[Point] = []
    if metric_source(trainer_log_dir) != "driver-log" and trainer_log_dir is not None:
        for exp in exp_dirs(trainer_log_dir):
            points += _exp_points(exp)
        return points
    for path in driver_logs:
        points += [
            (i.name, i.step, i.value) for i in driver_log.parse_file(path) if isinstance(i, driver_log.Scalar)
        ]
    return points
