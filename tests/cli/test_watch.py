"""`shepherd watch`: what one frame shows for a store filled by hand, in plain text and with rich."""

from __future__ import annotations

import argparse
import io
import json
import sqlite3
from pathlib import Path

import pytest
from rich.console import Console

from supervisor.cli.main import main
from supervisor.cli.watch import collect, render, watch
from supervisor.domain.runs import RunState
from supervisor.settings import Settings
from supervisor.store import Store

SPEC = json.dumps({"name": "grpo", "command": ["true"]})
SNAPSHOT = {
    "status": {
        "state": "training",
        "step": 12,
        "total_steps": 100,
        "phase": "rollout",
        "phase_done": 30,
        "phase_total": 64,
    },
    "bar:Generating rollouts": {"n": 34, "total": 64, "rate": 3.2, "at": 1.0},
    "metrics": {"step": 12, "train:reward": 0.4125, "val:accuracy": 0.55, "train:loss": 1.5},
    # Validation runs every few steps: its value is older than the newest reward's.
    "metric_steps": {"train:reward": 12, "val:accuracy": 10, "train:loss": 12},
}


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """Three runs: one training with a snapshot and a decision, one pending, one finished."""
    settings = Settings(root=tmp_path / "root")
    settings.ensure_dirs()
    s = Store(settings.db_path)
    s.create_run("grpo-a", "grpo", SPEC, "a.yaml")
    a = s.begin_attempt("grpo-a", lambda n: f"t-a-{n}", {})
    s.attempt_submitted("grpo-a", a.n, "101")
    s.observe_attempt("grpo-a", a.n, slurm_state="RUNNING", reason="None", nodes="node1", started=True)
    s.set_run_state("grpo-a", RunState.RUNNING)
    s.record_decision(
        "grpo-a", 1, rule="cuda-oom", action="resume,alert", signature="x", reason="oom", evidence={}
    )
    d = s.record_decision(
        "grpo-a", 1, rule="nccl-error", action="resume", signature="y", reason="nccl", evidence={}
    )
    assert d is not None
    s.set_decision_outcome(d, "resuming from step_10")
    s.record_decision(
        "grpo-a", 1, rule="ray-actor-died", action="none", signature="z", reason="followup", evidence={}
    )
    s.save_progress("grpo-a", 1, json.dumps(SNAPSHOT))
    s.create_run("grpo-b", "grpo-b", SPEC, "b.yaml")
    b = s.begin_attempt("grpo-b", lambda n: f"t-b-{n}", {})
    s.attempt_submitted("grpo-b", b.n, "102")
    s.observe_attempt("grpo-b", b.n, slurm_state="PENDING", reason="Resources", nodes=None)
    s.create_run("grpo-c", "grpo-c", SPEC, "c.yaml")
    s.set_run_state("grpo-c", RunState.COMPLETED, reason="completed")
    s.close()
    return tmp_path / "root"


def args(root: Path, run: str | None = None) -> argparse.Namespace:
    return argparse.Namespace(root=str(root), run=run, once=True)


def test_once_prints_one_plain_line_per_active_run(root: Path) -> None:
    out = io.StringIO()
    assert watch(args(root), out=out) == 0
    lines = out.getvalue().splitlines()
    assert len(lines) == 2  # the completed run is not active
    a, b = lines
    assert a.startswith("grpo-a  RUNNING  job 101#1")
    assert "step 12/100" in a and "Generating rollouts 34/64" in a
    assert "reward 0.4125 @12" in a and "val 0.55 @10" in a  # each metric with the step it was logged at
    assert "last: " in a and "nccl-error -> resuming from step_10" in a  # the newest acting decision
    assert b.startswith("grpo-b  PENDING") and "pending: Resources" in b and "reward -" in b


def test_a_named_run_is_shown_whatever_its_state(root: Path) -> None:
    out = io.StringIO()
    assert watch(args(root, "grpo-c"), out=out) == 0
    assert out.getvalue().splitlines() == ["grpo-c  COMPLETED  job -#0  reward -  val -"]


def test_an_unknown_run_is_an_error(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert watch(args(root, "nope"), out=io.StringIO()) == 1
    assert "no run called 'nope'" in capsys.readouterr().err


def test_the_terminal_frame_has_bars_metrics_and_the_decision(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    out = Tty()
    assert watch(args(root), out=out) == 0
    text = out.getvalue()
    for want in ("grpo-a", "12/100", "34/64", "0.4125", "0.55", "nccl-error", "Resources"):
        assert want in text, want
    assert "grpo-c" not in text


def test_rollouts_fall_back_to_the_status_phase_and_missing_metrics_show_a_dash(root: Path) -> None:
    store = Store.open_readonly(root / "state" / "shepherd.sqlite3")
    [view] = collect(store, "grpo-a")
    snap = {"status": {"step": 3, "phase": "generation", "phase_done": 5, "phase_total": 8}}
    console = Console(file=io.StringIO(), width=160, color_system=None)
    console.print(
        render([view.__class__(**{**{f: getattr(view, f) for f in view.__slots__}, "progress": snap})])
    )
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert "generation" in text and "5/8" in text and "3" in text
    store.close()


def test_watching_never_writes_to_the_store(root: Path) -> None:
    store = Store.open_readonly(root / "state" / "shepherd.sqlite3")
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        store.save_progress("grpo-a", 1, "{}")
    store.close()


def test_status_shows_the_progress_snapshot(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--root", str(root), "status", "--json", "grpo-a"]) == 0
    progress = json.loads(capsys.readouterr().out)["progress"]
    assert progress["attempt"] == 1 and progress["metrics"]["train:reward"] == 0.4125
    assert main(["--root", str(root), "status", "grpo-a"]) == 0
    text = capsys.readouterr().out
    assert "step 12/100 (rollout)" in text and "train:reward 0.4125 @12; val:accuracy 0.55 @10" in text
    assert main(["--root", str(root), "status", "--json", "grpo-b"]) == 0
    assert json.loads(capsys.readouterr().out)["progress"] is None
