"""A run's metrics as (tag, step, value) points, for `shepherd plot` and Slack pictures.

The trainer writes the same scalars twice: `exp_NNN/metrics.jsonl` (cheap to
read, one object per step) and TensorBoard event files. The jsonl file is
preferred; event files are the fallback for trainers that only log to
TensorBoard. Only the newest `exp_NNN/` counts: it is the live launch, and a
resumed run's earlier steps are repeated in it.
"""

from __future__ import annotations

from pathlib import Path

from supervisor.domain.runs import RunRow
from supervisor.domain.trainer_files import METRICS_FILE
from supervisor.watch.metrics import MetricsReader
from supervisor.watch.tbevents import TensorBoardWatcher, newest_exp_dir

Point = tuple[str, int, float]


def metric_points(trainer_log_dir: Path) -> list[Point]:
    """Points from `<trainer_log_dir>/exp_NNN/metrics.jsonl`, else from its TensorBoard files."""
    exp = newest_exp_dir(trainer_log_dir)
    if exp is None:
        return []
    jsonl = exp / METRICS_FILE
    if jsonl.is_file():
        points = [
            (tag, row.step, value)
            for row in MetricsReader(jsonl).read().rows
            for tag, value in row.values.items()
        ]
        if points:
            return points
    return [(s.tag, s.step, s.value) for s in TensorBoardWatcher(trainer_log_dir).read()]


def run_metric_points(run: RunRow) -> list[Point]:
    """The run's points; empty when its spec names no `trainer_log_dir` or nothing was written yet."""
    log_dir = run.spec.trainer_log_dir
    return metric_points(log_dir) if log_dir is not None else []
