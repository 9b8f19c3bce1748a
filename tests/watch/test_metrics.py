"""metrics.jsonl read incrementally, across partial lines, restarts and the trainer's resume rewrite."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

from supervisor.watch.metrics import MetricsReader, parse_metrics_line, to_metric_events


def line(step: int, **values: float) -> bytes:
    return (json.dumps({"step": step, "time": 100.0 + step, **values}) + "\n").encode()


def test_parses_step_time_and_numeric_scalars_only() -> None:
    row = parse_metrics_line(b'{"step": 3, "time": 5.5, "loss": 0.5, "note": "x", "ok": true, "reward": 1}')
    assert row is not None and (row.step, row.time, row.values) == (3, 5.5, {"loss": 0.5, "reward": 1.0})


def test_nan_loss_is_kept_as_a_value() -> None:
    row = parse_metrics_line(b'{"step": 3, "loss": NaN}')
    assert row is not None and math.isnan(row.values["loss"])


def test_lines_without_step_are_rejected() -> None:
    assert parse_metrics_line(b'{"loss": 1}') is None
    assert parse_metrics_line(b"garbage") is None
    assert parse_metrics_line(b'{"step": "x"}') is None


def test_incremental_reads_hold_back_a_partial_line(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    path.write_bytes(line(1, loss=1.0) + line(2, loss=0.9)[:10])
    reader = MetricsReader(path)
    assert [r.step for r in reader.read().rows] == [1]
    with open(path, "ab") as fh:
        fh.write(line(2, loss=0.9)[10:] + line(3, loss=0.8))
    assert [r.step for r in reader.read().rows] == [2, 3]
    assert reader.read().rows == []


def test_restart_from_saved_cursor_reads_only_new_rows(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    path.write_bytes(line(1, loss=1.0))
    saved = MetricsReader(path).read().cursor
    with open(path, "ab") as fh:
        fh.write(line(2, loss=0.5))
    assert [r.step for r in MetricsReader(path, saved).read().rows] == [2]


def test_resume_rewrite_emits_only_the_redone_steps(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    path.write_bytes(line(1, loss=1.0) + line(2, loss=0.9) + line(3, loss=0.8))
    reader = MetricsReader(path)
    assert len(reader.read().rows) == 3
    tmp = tmp_path / "metrics.tmp"  # the trainer resumes from step 2: keeps 1..2, redoes 3
    tmp.write_bytes(line(1, loss=1.0) + line(2, loss=0.9) + line(3, loss=0.7))
    os.replace(tmp, path)
    res = reader.read()
    assert res.replaced
    assert [(r.step, r.values["loss"]) for r in res.rows] == [(3, 0.7)]


def test_bad_lines_are_counted_and_skipped(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    path.write_bytes(b"not json\n" + line(1, loss=1.0))
    res = MetricsReader(path).read()
    assert res.bad_lines == 1 and [r.step for r in res.rows] == [1]
    assert res.cursor is not None and res.cursor.line_no == 2


def test_missing_file_is_no_rows(tmp_path: Path) -> None:
    assert MetricsReader(tmp_path / "nope.jsonl").read().rows == []


def test_rows_become_metric_events() -> None:
    row = parse_metrics_line(line(4, loss=0.5, reward=0.25))
    assert row is not None
    evs = to_metric_events("r", 2, [row], now=0.0)
    got = {(e.tag, e.step, e.value, e.at) for e in evs}
    assert got == {("loss", 4, 0.5, 104.0), ("reward", 4, 0.25, 104.0)}


def test_events_carry_shepherds_metric_names_for_the_rules() -> None:
    row = parse_metrics_line(line(7, **{"train/reward_mean": 0.5, "train/loss": 0.1, "val/accuracy": 0.3}))
    assert row is not None
    tags = {e.tag for e in to_metric_events("r", 1, [row], now=0.0)}
    assert tags == {"train:reward", "train:loss", "val:accuracy"}
