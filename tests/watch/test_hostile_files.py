"""Files a job writes are read within bounds: a hostile or broken status.json, metrics.jsonl, event file or
log line is skipped with a log line, never crashes the reader, and never stops the next good value."""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import pytest

from supervisor.watch.metrics import MAX_LINE_BYTES, MAX_VALUES_PER_ROW, MetricsReader, parse_metrics_line
from supervisor.watch.progress import MAX_STATUS_BYTES, StatusReader, parse_status, parse_tqdm
from supervisor.watch.tbevents import MAX_DECODED_RECORD, EventFileReader, frame_record

pytestmark = pytest.mark.timeout(60)  # a regression must fail, not hang CI


def scalar_event(step: int, tag: str, value: float) -> bytes:
    """An Event{wall_time, step, summary{value{tag, simple_value}}} in protobuf wire format."""
    t = tag.encode()
    value_msg = b"\x0a" + bytes([len(t)]) + t + b"\x15" + struct.pack("<f", value)
    summary = b"\x0a" + bytes([len(value_msg)]) + value_msg
    head = b"\x09" + struct.pack("<d", 1.0) + b"\x10" + bytes([step])
    return head + b"\x2a" + bytes([len(summary)]) + summary


def test_deeply_nested_status_json_is_no_update_not_a_crash() -> None:
    assert parse_status(b'{"a":' * 100_000 + b"1" + b"}" * 100_000) is None
    assert parse_status(b"[" * 100_000 + b"]" * 100_000) is None


def test_an_oversized_status_json_is_ignored_until_it_changes(tmp_path: Path) -> None:
    path = tmp_path / "status.json"
    path.write_text(json.dumps({"step": 3, "pad": "x" * MAX_STATUS_BYTES}))
    reader = StatusReader(path)
    assert reader.poll() is None
    path.write_text(json.dumps({"step": 4}))
    status = reader.poll()
    assert status is not None and status.step == 4


def test_status_json_keeps_a_bounded_amount_of_unknown_fields() -> None:
    raw = {"step": 1, "state": "s" * 100_000, **{f"k{i}": "v" * 5000 for i in range(150)}}
    status = parse_status(json.dumps(raw))
    assert status is not None
    assert len(status.state) <= 1001
    assert len(status.extra) <= 64
    assert all(len(v) <= 1001 for v in status.extra.values())


def test_a_fifo_named_status_json_does_not_block(tmp_path: Path) -> None:
    path = tmp_path / "status.json"
    os.mkfifo(path)
    assert StatusReader(path).poll() is None


def test_a_metrics_line_longer_than_a_read_is_skipped_and_the_next_line_read(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    path.write_bytes(b'{"step": 1, "loss": ' + b"1" * (3 * MAX_LINE_BYTES) + b'}\n{"step": 2, "loss": 0.5}\n')
    reader = MetricsReader(path, max_bytes=MAX_LINE_BYTES + 10)
    rows = []
    for _ in range(10):
        got = reader.read()
        rows += got.rows
        if rows:
            break
    assert [(r.step, r.values) for r in rows] == [(2, {"loss": 0.5})]


def test_a_deeply_nested_metrics_line_is_a_bad_line() -> None:
    assert parse_metrics_line(b'{"step": 1, "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}") is None


def test_a_metrics_row_keeps_a_bounded_number_of_values() -> None:
    row = parse_metrics_line(json.dumps({"step": 1, **{f"m{i}": i for i in range(10 * MAX_VALUES_PER_ROW)}}))
    assert row is not None and len(row.values) == MAX_VALUES_PER_ROW


def test_an_event_record_over_the_limit_is_stepped_over_unread(tmp_path: Path) -> None:
    path = tmp_path / "events.out.tfevents.1.host"
    huge = frame_record(b"\x00" * (MAX_DECODED_RECORD + 1))
    path.write_bytes(frame_record(scalar_event(1, "a", 1.0)))
    with path.open("ab") as fh:
        fh.write(huge + frame_record(scalar_event(2, "a", 2.0)))
    reader = EventFileReader(path)
    steps = []
    for _ in range(5):  # each read is bounded; the reader goes on while it advances
        res = reader.read(max_bytes=1 << 20)
        steps += [s.step for s in res.scalars]
    assert steps == [1, 2]
    assert reader.offset == path.stat().st_size


def test_a_huge_record_not_yet_fully_written_is_waited_on(tmp_path: Path) -> None:
    path = tmp_path / "events.out.tfevents.1.host"
    huge = frame_record(b"\x00" * (MAX_DECODED_RECORD + 1))
    path.write_bytes(huge[: len(huge) // 2])
    reader = EventFileReader(path)
    reader.read()
    assert reader.offset == 0


def test_a_line_of_digits_ending_like_a_bar_is_read_in_linear_time() -> None:
    # under Python's re the bar regex re-scanned the digits from every start position: minutes
    assert parse_tqdm("1" * 60_000 + "it/s]") is None
    assert parse_tqdm("it/s]" + "a" * 60_000) is None
    bar = parse_tqdm("x" * 60_000 + " Training: 50%|#####     | 5/10 [00:01<00:01, 4.00it/s]")
    assert bar is not None and bar.n == 5
