"""What needs a person comes first: a stopped run, a rule's give-up and a held run wait for one (with the
command that moves each on); `status --active/--needs-human/--since/-n` choose runs; `give-up` from the CLI
settles a run and its Slack incident; `hold` says what is paused and what release would do."""

from __future__ import annotations

import argparse
import io
import json
from datetime import datetime
from pathlib import Path

import anyio
import pytest

from supervisor.act.control import Controller, DaemonRunControl, on_hold_text
from supervisor.cli.attention import Selection, Waiting, held_text, parse_since, select, waiting
from supervisor.cli.main import main
from supervisor.cli.watch import watch
from supervisor.domain.runs import RunRow, RunState
from supervisor.notify.slack.incidents import CLOSED_BY_PERSON, Incident, Timing, next_step
from supervisor.settings import Settings
from supervisor.store import Store

NOW = 1_800_000_000.0
SPEC = json.dumps({"name": "toy", "command": ["true"]})


def run(
    rid: str,
    state: RunState,
    *,
    held: bool = False,
    reason: str | None = None,
    created: float = NOW - 100,
    next_at: float | None = None,
    next_attempt: dict[str, object] | None = None,
) -> RunRow:
    return RunRow(
        rid,
        rid.split("-")[0],
        SPEC,
        "/x",
        state,
        created,
        created,
        next_at,
        json.dumps(next_attempt) if next_attempt else None,
        reason,
        held,
    )


def test_a_stopped_run_and_a_rules_give_up_wait_for_a_person_until_a_person_gives_up() -> None:
    failed = run("a", RunState.FAILED, reason="hang: no progress for 30 min")
    assert waiting(failed, given_up_by=None, now=NOW) == Waiting(
        "stopped: hang: no progress for 30 min", ("shepherd resume a", "shepherd give-up a")
    )
    gave_up = run("b", RunState.GAVE_UP, reason="3 resumes in 1 h")
    w = waiting(gave_up, given_up_by=None, now=NOW)
    assert (
        w is not None and w.text() == "gave up: 3 resumes in 1 h; `shepherd resume b` or `shepherd give-up b`"
    )
    assert waiting(gave_up, given_up_by="cli:alice", now=NOW) is None
    for state in (RunState.RUNNING, RunState.COMPLETED, RunState.CANCELLED, RunState.BACKOFF):
        assert waiting(run("c", state), given_up_by=None, now=NOW) is None


def test_a_held_run_says_auto_resume_is_paused_and_what_release_would_do_never_a_past_time() -> None:
    held = run(
        "a", RunState.BACKOFF, held=True, next_at=NOW - 3600, next_attempt={"checkpoint": "/ck/step_40"}
    )
    w = waiting(held, given_up_by=None, now=NOW)
    assert w == Waiting(
        "held: auto-resume is paused; on release it resubmits from step_40 at once", ("shepherd release a",)
    )
    assert held_text(run("b", RunState.HELD, held=True), NOW) == (
        "held: its job waits in Slurm's queue without starting"
    )
    assert on_hold_text(held, None, submitted_before=True) == (
        "auto-resume is paused; `shepherd release a` resubmits it from step_40"
    )
    assert on_hold_text(held, "77", submitted_before=True).startswith("job 77 stays in Slurm's queue")


def test_status_selection_puts_the_runs_waiting_for_a_person_first() -> None:
    runs = [
        run("old-done", RunState.COMPLETED, created=NOW - 90_000),
        run("stopped", RunState.FAILED, created=NOW - 50_000),
        run("training", RunState.RUNNING, created=NOW - 10),
        run("cancelled", RunState.CANCELLED, created=NOW - 5),
    ]

    def waits(r: RunRow) -> Waiting | None:
        return waiting(r, given_up_by=None, now=NOW)

    def ids(sel: Selection) -> list[str]:
        return [r.id for r, _ in select(runs, sel, waits)]

    assert ids(Selection()) == ["stopped", "old-done", "training", "cancelled"]
    assert ids(Selection(active=True)) == ["stopped", "training"]
    assert ids(Selection(needs_human=True)) == ["stopped"]
    assert ids(Selection(since=NOW - 3600)) == ["training", "cancelled"]
    assert ids(Selection(newest=2)) == ["training", "cancelled"]
    assert ids(Selection(active=True, newest=1)) == ["training"]


def test_since_takes_a_duration_a_time_of_day_or_a_date() -> None:
    assert parse_since("2h", NOW) == NOW - 7200
    assert parse_since("1d", NOW) == NOW - 86400
    nine = datetime.combine(datetime.fromtimestamp(NOW).date(), datetime.strptime("09:00", "%H:%M").time())
    assert parse_since("09:00", NOW) == nine.timestamp()
    assert parse_since("2026-11-27 09:00", NOW) == datetime(2026, 11, 27, 9, 0).timestamp()
    with pytest.raises(ValueError, match="expected a duration"):
        parse_since("yesterday", NOW)


def test_a_run_a_person_gave_up_on_resolves_its_incident_a_rules_give_up_does_not() -> None:
    inc = Incident(1, "a", opened_at=NOW - 100, flush_at=NOW - 90, headline={}, message_id=5)
    assert next_step(inc, NOW, Timing(), CLOSED_BY_PERSON) == "resolve"
    assert next_step(inc, NOW, Timing(), "GAVE_UP") is None


# ---- through the store and the CLI ---------------------------------------------------------------------
@pytest.fixture
def root(tmp_path: Path) -> Path:
    """One run training, one a rule gave up on, one finished long ago."""
    settings = Settings(root=tmp_path / "root")
    settings.ensure_dirs()
    s = Store(settings.db_path)
    s.create_run("train-1", "train", SPEC, "a.yaml")
    s.set_run_state("train-1", RunState.RUNNING)
    s.create_run("stuck-1", "stuck", SPEC, "b.yaml")
    s.set_run_state(
        "stuck-1",
        RunState.GAVE_UP,
        reason="CUDA out of memory 3 times",
        event=("gave-up", "CUDA out of memory 3 times", {"rule": "cuda-oom"}),
    )
    s.create_run("done-1", "done", SPEC, "c.yaml")
    s.set_run_state("done-1", RunState.COMPLETED, reason="completed")
    s.close()
    return tmp_path / "root"


def test_watch_lists_the_run_waiting_for_a_person_on_top_with_the_command(root: Path) -> None:
    out = io.StringIO()
    assert watch(argparse.Namespace(root=str(root), run=None, once=True), out=out) == 0
    lines = out.getvalue().splitlines()
    assert lines[0] == (
        "!! stuck-1  GAVE_UP  job -#0  NEEDS A PERSON: gave up: CUDA out of memory 3 times; "
        "`shepherd resume stuck-1` or `shepherd give-up stuck-1`"
    )
    assert lines[1].startswith("train-1  RUNNING")
    assert len(lines) == 2


def test_give_up_from_the_cli_settles_a_rules_give_up(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--root", str(root), "status", "--needs-human"]) == 0
    out = capsys.readouterr().out
    assert "!stuck-1" in out and "NEEDS A PERSON: gave up" in out and "train-1" not in out
    assert main(["--root", str(root), "give-up", "stuck"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "gave up on stuck-1"  # after the lease's log lines
    assert main(["--root", str(root), "status", "--needs-human"]) == 0
    assert "no runs match" in capsys.readouterr().out
    assert main(["--root", str(root), "give-up", "stuck"]) == 1
    assert "already GAVE_UP" in capsys.readouterr().err
    assert main(["--root", str(root), "status", "--since", "soon"]) == 2


def test_slacks_status_lists_the_run_waiting_for_a_person_first(root: Path) -> None:
    settings = Settings(root=root)
    store = Store(settings.db_path)
    control = DaemonRunControl(Controller(store, slurm=None), settings, sink=None)  # type: ignore[arg-type]
    assert anyio.run(control.status, None) == "stuck-1: GAVE_UP — needs a person\ntrain-1: RUNNING"
    store.set_run_state("stuck-1", RunState.GAVE_UP, event=("gave-up", "given up by U1", {"actor": "U1"}))
    assert anyio.run(control.status, None) == "train-1: RUNNING"
