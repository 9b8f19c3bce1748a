"""`shepherd report`: a run's history as the daemon writes it into the store (attempts, the monitor's steps
and marks, the decision that resumed it) comes out as each phase's time and GPU-hours, the failure's cost,
and a timeline picture; bad input is refused with a clear message."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from supervisor.cli.main import main
from supervisor.domain.runs import RunState
from supervisor.store import Store

RUN = "toy-20261121-000000-abcd"
T0 = 1_763_700_000.0


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


def write_history(root: Path) -> None:
    """Attempt 1 crashes in step 12 (hf-cache-not-shared), attempt 2 resumes from step_10 and completes."""
    clock = Clock()
    store = Store(root / "state" / "shepherd.sqlite3", clock=clock)
    spec = {
        "name": "toy",
        "command": ["echo"],
        "slurm": {"nodes": 2, "gpus_per_node": 4},
        "checkpoint": {"dir": "/ck"},
        "resume": {"pass_checkpoint": ["--resume-from", "{checkpoint}"]},
    }
    store.create_run(RUN, "toy", json.dumps(spec), "/x")
    store.begin_attempt(RUN, lambda n: f"t{n}", {"ckpt_step_at_submit": None})  # at T0
    clock.now = T0 + 1
    store.attempt_submitted(RUN, 1, "101")
    clock.now = T0 + 10
    store.observe_attempt(RUN, 1, slurm_state="RUNNING", reason=None, nodes="n1", started=True)
    store.open_mark(RUN, 1, "ray_up", T0 + 25)
    store.open_mark(RUN, 1, "training", T0 + 40)
    for s in range(1, 12):
        store.record_step(RUN, 1, s, T0 + 40 + 5 * s, reward=0.1 + 0.01 * s)
    store.close_mark(store.open_mark(RUN, 1, "checkpointing", T0 + 90), T0 + 93)
    store.open_mark(RUN, 1, "checkpoint", T0 + 93, step=10)
    clock.now = T0 + 98.5
    store.record_decision(
        RUN,
        1,
        rule="hf-cache-not-shared",
        action="resume,alert",
        signature="hf-cache-not-shared:x",
        reason="Pretrained run config not found",
        evidence={"seen_at": T0 + 98.0, "since": None, "policy": {"category": "failure", "ckpt_after": 10}},
    )
    store.set_run_state(RUN, RunState.BACKOFF, next_action_at=T0 + 103.5)
    clock.now = T0 + 101
    store.observe_attempt(RUN, 1, slurm_state="FAILED", reason=None, nodes="n1", exit_code=1, ended=True)
    clock.now = T0 + 103.5
    store.begin_attempt(RUN, lambda n: f"t{n}", {"checkpoint": "/ck/step_10", "ckpt_step_at_submit": 10})
    clock.now = T0 + 104
    store.attempt_submitted(RUN, 2, "102")
    clock.now = T0 + 110
    store.observe_attempt(RUN, 2, slurm_state="RUNNING", reason=None, nodes="n1", started=True)
    store.open_mark(RUN, 2, "training", T0 + 130)
    for s in range(11, 25):
        store.record_step(RUN, 2, s, T0 + 130 + 5 * (s - 10), reward=0.1 + 0.01 * s)
    clock.now = T0 + 210
    store.observe_attempt(RUN, 2, slurm_state="COMPLETED", reason=None, nodes="n1", exit_code=0, ended=True)
    store.set_run_state(RUN, RunState.COMPLETED, reason="completed")
    store.create_run("old-20200101-000000-abcd", "old", '{"name": "old", "command": ["echo"]}', "/x")
    store.db.execute("UPDATE runs SET created_at = 0 WHERE id = 'old-20200101-000000-abcd'")
    store.close()


def report_json(root: Path, capsys: pytest.CaptureFixture[str], *args: str) -> Any:
    assert main(["--root", str(root), "report", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_the_report_splits_the_runs_time_and_prices_the_failure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "root"
    write_history(root)
    (r,) = report_json(root, capsys, "toy")["runs"]
    assert (r["run"], r["gpus"], r["gpu_unit"], r["attempts"], r["restarts"]) == (RUN, 8.0, "GPU", 2, 1)
    assert r["wall_s"] == pytest.approx(210.0)
    secs = {k: round(v, 6) for k, v in r["seconds"].items() if v}
    assert secs == {
        "queued": 10.0 + 6.5,
        "bring_up": 30.0 + 20.0,
        "productive": 50.0 + 70.0,
        "checkpointing": 3.0,
        "redone": 5.0,  # step_10 written at 93, the failure seen at 98
        "detection": 0.5,
        "resubmit": 5.0,
        "teardown": 10.0,
    }
    assert r["allocated_gpu_hours"] == pytest.approx((91 + 100) * 8 / 3600)
    assert r["goodput"] == pytest.approx(120 / 191)
    (f,) = r["failures"]
    assert (f["rule"], f["attempt"], f["steps_redone"]) == ("hf-cache-not-shared", 1, 1)
    assert (
        f["redone_s"],
        f["detection_s"],
        f["resubmit_s"],
        f["requeue_s"],
        f["bring_up_s"],
    ) == pytest.approx((5.0, 0.5, 5.0, 6.5, 20.0))
    assert r["failures_by_rule"] == {"hf-cache-not-shared": 1}


def test_text_totals_since_and_the_timeline_picture(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "root"
    write_history(root)
    assert main(["--root", str(root), "report"]) == 0
    text = capsys.readouterr().out
    assert f"{RUN} (COMPLETED): 2 attempt(s)" in text and "goodput 62.8%" in text
    assert "hf-cache-not-shared x1" in text and "all 2 runs" in text
    assert [x["run"] for x in report_json(root, capsys, "--since", "2021-01-01")["runs"]] == [RUN]
    png = tmp_path / "timeline.png"
    assert main(["--root", str(root), "report", "toy", "-o", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and f"timeline: {png}" in capsys.readouterr().out


def test_bad_input_gets_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "root"
    write_history(root)
    assert main(["--root", str(root), "report", "--since", "last tuesday"]) == 1
    assert "--since 'last tuesday' is not a date" in capsys.readouterr().err
    assert main(["--root", str(root), "report", "-o", str(tmp_path / "x.png")]) == 1
    assert "-o draws one run's timeline: name one run (2 selected)" in capsys.readouterr().err
    assert main(["--root", str(root), "report", "ghost"]) == 1
    assert "no run called 'ghost'" in capsys.readouterr().err
