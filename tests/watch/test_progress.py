"""tqdm bars and status.json become progress; torn or odd input never raises."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from supervisor.watch.lines import normalise_chunk
from supervisor.watch.progress import (
    StatusReader,
    bar_event,
    bar_key,
    parse_status,
    parse_tqdm,
    status_events,
)


def test_nemo_gym_rollout_bar() -> None:
    bar = parse_tqdm("Collecting rollouts:  21%|##        | 428/2048 [02:01<05:42, 4.73it/s]")
    assert bar is not None
    assert (bar.desc, bar.n, bar.total, bar.rate, bar.unit) == ("Collecting rollouts", 428, 2048, 4.73, "it")
    assert (bar.elapsed_s, bar.remaining_s) == (121, 342)


def test_seconds_per_item_is_turned_into_a_rate() -> None:
    bar = parse_tqdm("train:  50%|█████     | 5/10 [00:10<00:10,  2.00s/it, loss=0.3]")
    assert bar is not None and bar.rate == pytest.approx(0.5) and bar.n == 5


def test_unknown_rate_and_remaining() -> None:
    bar = parse_tqdm("x:   0%|          | 0/10 [00:00<?, ?it/s]")
    assert bar is not None and (bar.n, bar.total, bar.rate, bar.remaining_s) == (0, 10, None, None)


def test_bar_without_total() -> None:
    bar = parse_tqdm("Collecting rollouts: 428it [00:01, 300.00it/s]")
    assert bar is not None and (bar.n, bar.total, bar.rate) == (428, None, 300.0)


def test_unit_scaled_counts_and_custom_units() -> None:
    bar = parse_tqdm("gen:  58%|#####8    | 1.20k/2.05k [00:01<00:01, 1.10ksamples/s]")
    assert bar is not None and (bar.n, bar.total, bar.rate, bar.unit) == (1200, 2050, 1100, "samples")
    bar = parse_tqdm("steps: 12step [00:30, 2.50s/step]")
    assert bar is not None and (bar.n, bar.rate, bar.unit) == (12, 0.4, "step")


def test_hour_long_elapsed_times() -> None:
    bar = parse_tqdm("x:  10%|#         | 1/10 [1:02:03<9:18:27, 3723.00s/it]")
    assert bar is not None and bar.elapsed_s == 3723


def test_the_newest_bar_wins_in_a_line_with_a_splice() -> None:
    raw = (
        b"\rCollecting rollouts:   5%|5         | 100/2048 [00:10<03:00, ?it/s[E ProcessGroupNCCL.cpp:1] "
        b"Watchdog timing out.11:15:08, 17.35s/it]\rCollecting rollouts:   6%|6         | 120/2048 "
        b"[00:11<03:00, 10.0it/s]\n"
    )
    (text,) = normalise_chunk(raw).texts
    bar = parse_tqdm(text)
    assert bar is not None and (bar.desc, bar.n, bar.rate) == ("Collecting rollouts", 120, 10.0)


def test_non_bars_are_none() -> None:
    for line in ("", "step 5 [00:01, hello]", "RuntimeError: 5/10 failed", "50%| done"):
        assert parse_tqdm(line) is None


def test_bar_events_use_rollouts_key_for_nemo_gyms_bar() -> None:
    bar = parse_tqdm("Collecting rollouts:  21%|##  | 428/2048 [02:01<05:42, 4.73it/s]")
    assert bar is not None
    ev = bar_event("r1", 1, bar, at=10.0)
    assert (ev.key, ev.value, ev.total, ev.at, ev.detail["rate"]) == ("rollouts", 428, 2048, 10.0, 4.73)
    assert bar_key("Validation batches") == "bar:validation_batches"


STATUS = {
    "state": "training",
    "step": 12,
    "total_steps": 100,
    "phase": "generating",
    "phase_done": 3,
    "phase_total": 8,
    "rate": 1.5,
    "rate_unit": "step/s",
    "last_checkpoint": "/ck/step_10",
    "best_checkpoint": {"path": "/ck/step_5", "metric": 0.9},
    "best_metric": 0.9,
    "metric_name": "val:reward",
    "exit_code": None,
    "error": None,
    "pid": 4242,
    "started_at": 1.0,
    "last_progress_at": 50.0,
    "timestamp": 60.0,
    "new_field_from_a_newer_trainer": [1, 2],
}


def test_status_json_is_read_leniently() -> None:
    st = parse_status(json.dumps(STATUS))
    assert st is not None
    assert (st.state, st.step, st.total_steps, st.phase_done, st.timestamp) == ("training", 12, 100, 3, 60.0)
    assert st.best_checkpoint == "/ck/step_5"
    assert st.extra == {"new_field_from_a_newer_trainer": [1, 2]}


def test_wrongly_typed_fields_become_none_not_errors() -> None:
    st = parse_status(json.dumps({"step": "seven", "total_steps": True, "timestamp": "12.5", "state": None}))
    assert st is not None and (st.step, st.total_steps, st.timestamp, st.state) == (None, None, 12.5, "")


@pytest.mark.parametrize("raw", [b"", b"{", b'{"step": 1', b"[1, 2]", b"null", b"\xff\xfe", b'{"step": 1}}'])
def test_torn_or_invalid_status_is_no_update(raw: bytes) -> None:
    assert parse_status(raw) is None


def test_heartbeat_is_status_but_not_step_progress() -> None:
    first = parse_status(json.dumps(STATUS))
    beat = parse_status(json.dumps({**STATUS, "timestamp": 90.0}))
    moved = parse_status(json.dumps({**STATUS, "step": 13, "last_progress_at": 95.0, "timestamp": 95.0}))
    assert first is not None and beat is not None and moved is not None
    assert [e.key for e in status_events("r", 1, first, None, 0.0)] == ["status", "step"]
    evs = status_events("r", 1, beat, first, 0.0)
    assert [e.key for e in evs] == ["status"] and evs[0].at == 90.0
    evs = status_events("r", 1, moved, beat, 0.0)
    assert [(e.key, e.value, e.at) for e in evs] == [("status", 13, 95.0), ("step", 13, 95.0)]
    assert evs[0].detail["phase"] == "generating" and evs[0].total == 100


def test_status_reader_keeps_last_good_snapshot_across_a_torn_write(tmp_path: Path) -> None:
    path = tmp_path / "status.json"
    reader = StatusReader(path)
    assert reader.poll() is None  # not there yet
    path.write_text(json.dumps(STATUS))
    assert reader.poll() is not None
    assert reader.poll() is None  # unchanged
    path.write_text('{"state": "trai')  # torn (a writer that does not replace atomically)
    assert reader.poll() is None
    assert reader.last is not None and reader.last.step == 12
    tmp = tmp_path / "status.tmp"
    tmp.write_text(json.dumps({**STATUS, "step": 13}))
    os.replace(tmp, path)
    evs = reader.poll_events("r", 1, now=0.0)
    assert [(e.key, e.value) for e in evs] == [("status", 13), ("step", 13)]
