"""Where a run's metrics come from (watch/sources.py): metrics.jsonl, else TensorBoard, else the driver log;
every launch's exp dir counts for the history, under Shepherd's metric names."""

from __future__ import annotations

import json
from pathlib import Path

from tensorboard.compat.proto import event_pb2

from supervisor.watch.sources import metric_points, metric_source
from supervisor.watch.tbevents import frame_record

NEMO_DRIVER_LOG = """\

========================= Step 1/2 =========================
▶ Preparing batch...

📊 Training Results:
  • Loss: 0.5000
  • Generation KL Error: 0.0010
  • Avg Reward: 0.2500
  • Mean Generation Length: 12.0000

⏱️  Timing:
  • Total step time: 3.21s
  • generation: 1.00s (31.2%)

========================= Step 2/2 =========================
▶ Starting validation at step 2...

📊 Validation Results:
    • Accuracy: 0.7500
    • Average response length: 10.5 tokens

📊 Training Results:
  • Loss: 0.4000
  • Avg Reward: 0.5000
Saving checkpoint for step 2...
Max number of steps has been reached, stopping training early
"""


def _event(step: int, tag: str, value: float) -> bytes:
    ev = event_pb2.Event(wall_time=1.0, step=step)
    ev.summary.value.add(tag=tag, simple_value=value)
    return frame_record(bytes(ev.SerializeToString()))


def test_our_trainers_metrics_jsonl_across_launches_the_later_value_of_a_step_wins(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    (logs / "exp_001").mkdir(parents=True)
    (logs / "exp_001" / "metrics.jsonl").write_text(
        json.dumps({"step": 1, "train/reward_mean": 9.0})
        + "\n"
        + json.dumps({"step": 2, "train/reward_mean": 8.0})
        + "\n"
    )
    (logs / "exp_002").mkdir()
    (logs / "exp_002" / "metrics.jsonl").write_text(
        json.dumps({"step": 2, "time": 5.0, "train/reward_mean": 0.3, "val/accuracy": 0.5, "note": "text"})
        + "\n"
        + '{"step": 3, "train/rew'  # a partial line still being written
    )
    assert metric_source(logs) == "metrics.jsonl"
    assert metric_points(logs) == [
        ("train:reward", 1, 9.0),
        ("train:reward", 2, 8.0),
        ("train:reward", 2, 0.3),  # the resumed launch's value of step 2 comes later
        ("val:accuracy", 2, 0.5),
    ]


def test_nemo_rls_tensorboard_tags_are_read_when_there_is_no_jsonl(tmp_path: Path) -> None:
    tb = tmp_path / "logs" / "exp_001" / "tensorboard"
    tb.mkdir(parents=True)
    (tb / "events.out.tfevents.100.host.1.0").write_bytes(
        _event(1, "train/reward", 0.25) + _event(2, "validation/accuracy", 0.75)
    )
    assert metric_source(tmp_path / "logs") == "tensorboard"
    assert metric_points(tmp_path / "logs") == [("train:reward", 1, 0.25), ("val:accuracy", 2, 0.75)]


def test_with_tensorboard_off_the_driver_logs_printed_results_are_the_metrics(tmp_path: Path) -> None:
    (tmp_path / "logs" / "exp_001").mkdir(parents=True)  # NeMo RL makes the exp dir, without tensorboard/
    log = tmp_path / "ray-driver.log"
    log.write_text(NEMO_DRIVER_LOG)
    assert metric_source(tmp_path / "logs") == "driver-log"
    points = metric_points(tmp_path / "logs", [log])
    assert ("train:reward", 1, 0.25) in points and ("train:reward", 2, 0.5) in points
    assert ("val:accuracy", 2, 0.75) in points and ("train:loss", 2, 0.4) in points
    assert ("timing:total_step_time", 1, 3.21) in points


def test_no_trainer_log_dir_and_no_driver_log_gives_no_points(tmp_path: Path) -> None:
    assert metric_points(None) == [] and metric_points(tmp_path / "missing") == []
    assert metric_points(None, [tmp_path / "missing.log"]) == []
