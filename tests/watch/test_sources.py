"""`run_metric_points`: the newest exp dir's metrics.jsonl, else its TensorBoard files."""

from __future__ import annotations

import json
from pathlib import Path

from tensorboard.compat.proto import event_pb2

from supervisor.domain.runs import RunRow
from supervisor.store import Store
from supervisor.watch.sources import run_metric_points
from supervisor.watch.tbevents import frame_record


def _run(tmp_path: Path, **spec: object) -> RunRow:
    store = Store(tmp_path / "s.sqlite3")
    return store.create_run("r1", "r", json.dumps({"name": "r", "command": ["true"], **spec}), "spec.yaml")


def _event(step: int, tag: str, value: float) -> bytes:
    ev = event_pb2.Event(wall_time=1.0, step=step)
    ev.summary.value.add(tag=tag, simple_value=value)
    return frame_record(bytes(ev.SerializeToString()))


def test_points_come_from_the_newest_exp_dirs_jsonl(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    (logs / "exp_001").mkdir(parents=True)
    (logs / "exp_001" / "metrics.jsonl").write_text(json.dumps({"step": 1, "train/reward_mean": 9.0}) + "\n")
    (logs / "exp_002").mkdir()
    (logs / "exp_002" / "metrics.jsonl").write_text(
        json.dumps({"step": 1, "time": 5.0, "train/reward_mean": 0.1, "note": "text"})
        + "\n"
        + json.dumps({"step": 2, "train/reward_mean": 0.3, "val/accuracy": 0.5})
        + "\n"
        + '{"step": 3, "train/rew'  # a partial line still being written
    )
    run = _run(tmp_path, trainer_log_dir=str(logs))
    assert run_metric_points(run) == [
        ("train/reward_mean", 1, 0.1),
        ("train/reward_mean", 2, 0.3),
        ("val/accuracy", 2, 0.5),
    ]


def test_tensorboard_files_are_the_fallback(tmp_path: Path) -> None:
    tb = tmp_path / "logs" / "exp_001" / "tensorboard"
    tb.mkdir(parents=True)
    (tb / "events.out.tfevents.100.host.1.0").write_bytes(
        _event(1, "train/reward_mean", 0.25) + _event(2, "val/accuracy", 0.75)
    )
    run = _run(tmp_path, trainer_log_dir=str(tmp_path / "logs"))
    assert run_metric_points(run) == [
        ("train/reward_mean", 1, 0.25),
        ("val/accuracy", 2, 0.75),
    ]


def test_no_trainer_log_dir_or_nothing_written_gives_no_points(tmp_path: Path) -> None:
    run = _run(tmp_path)
    assert run_metric_points(run) == []
    run2 = _run(tmp_path / "b", trainer_log_dir=str(tmp_path / "missing"))
    assert run_metric_points(run2) == []
