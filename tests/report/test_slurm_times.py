"""An attempt's start and end are Slurm's (StartTime, EndTime), not when the daemon happened to poll: a job
that started and ended between two polls is drawn running, not queued, with its steps inside its span."""

from __future__ import annotations

import json
import time
from pathlib import Path

from supervisor.decide.transitions import slurm_times, transition
from supervisor.domain.jobstate import JobState
from supervisor.report.read import run_report
from supervisor.report.text import report_json, report_lines
from supervisor.slurm.parse import JobObservation, parse_sacct, parse_slurm_time
from supervisor.slurm.reconcile import AttemptUpdate, UpdateKind
from supervisor.store import Store

SPEC = json.dumps({"name": "grpo", "command": ["true"], "slurm": {"nodes": 1, "gpus_per_node": 8}})


def local(text: str) -> float:
    return time.mktime(time.strptime(text, "%Y-%m-%dT%H:%M:%S"))


T0 = local("2026-11-23T22:00:00")


def sacct_row(start: str, end: str, state: str = "COMPLETED") -> JobObservation:
    [obs], problems = parse_sacct(
        f"77|shep-r1-a1|{state}|0:0|shepherd:run=r1:attempt=1|node1|{start}|{end}|00:10:00|None\n"
    )
    assert problems == []
    return obs


def test_slurm_times_are_read_in_local_time_and_unknown_is_none() -> None:
    assert parse_slurm_time("2026-11-23T22:26:51") == local("2026-11-23T22:26:51")
    assert parse_slurm_time("Unknown") is None and parse_slurm_time("") is None
    assert parse_slurm_time("not a time") is None


def test_sacct_gives_a_jobs_start_and_end() -> None:
    obs = sacct_row("2026-11-23T22:01:00", "2026-11-23T22:09:00")
    assert slurm_times(obs, started=True, ended=True, now=T0 + 3600) == (T0 + 60, T0 + 540)


def test_a_pending_jobs_start_is_a_forecast_and_a_clock_ahead_of_ours_is_cut_to_now() -> None:
    forecast = JobObservation("77", "shep-r1-a1", JobState.PENDING, start_time="2026-11-23T23:00:00")
    assert slurm_times(forecast, started=False, ended=False, now=T0) == (None, None)
    ahead = sacct_row("2026-11-23T22:01:00", "2026-11-23T22:09:00")
    assert slurm_times(ahead, started=True, ended=True, now=T0 + 300) == (T0 + 60, T0 + 300)


def store_with_attempt(tmp_path: Path, now: list[float]) -> Store:
    s = Store(tmp_path / "db.sqlite3", clock=lambda: now[0])
    s.create_run("r1", "grpo", SPEC, "r1.yaml")
    s.begin_attempt("r1", lambda n: f"shep-r1-a{n}", {})
    s.attempt_submitted("r1", 1, "77")
    return s


def test_a_job_that_ran_between_two_polls_is_drawn_running_with_its_steps_inside(tmp_path: Path) -> None:
    now = [T0]
    s = store_with_attempt(tmp_path, now)
    for step in range(1, 6):  # the monitor read these steps from the trainer's files
        s.record_step("r1", 1, step, T0 + 120 + 60 * step, reward=0.1 * step)
    now[0] = T0 + 600  # the first poll to see it: it has already ended
    run, attempt = s.get_run("r1"), s.get_attempt("r1", 1)
    assert run is not None and attempt is not None
    ended = sacct_row("2026-11-23T22:01:00", "2026-11-23T22:07:00")
    tr = transition(AttemptUpdate("r1", 1, UpdateKind.ENDED, ended), run, attempt, now=now[0], grace_s=600)
    a = tr.attempt
    s.observe_attempt(
        "r1", 1, slurm_state=a.slurm_state, reason=a.reason, nodes=a.nodes, exit_code=a.exit_code,
        ended=a.ended, started=a.started, started_at=a.started_at, ended_at=a.ended_at,
    )  # fmt: skip
    row = s.get_attempt("r1", 1)
    assert row is not None
    assert (row.started_at, row.ended_at) == (T0 + 60, T0 + 420)
    assert (row.started_from, row.ended_from) == ("slurm", "slurm")
    rep = run_report(s, run, now[0])
    [att] = rep.cost.attempt_costs
    assert att.seconds["queued"] == 60.0  # submission to Slurm's start, not to the poll that saw the end
    assert att.seconds["productive"] > 0
    assert not any(line.strip().startswith("times of attempt") for line in report_lines(rep))
    assert report_json(rep)["attempt_detail"][0]["times_from"] == {"start": "slurm", "end": "slurm"}


def test_without_slurm_times_the_poll_times_are_kept_and_the_report_says_so(tmp_path: Path) -> None:
    now = [T0 + 30]
    s = store_with_attempt(tmp_path, now)
    s.observe_attempt("r1", 1, slurm_state="RUNNING", reason=None, nodes="node1", started=True)
    now[0] = T0 + 500
    s.observe_attempt("r1", 1, slurm_state="COMPLETED", reason=None, nodes="node1", ended=True)
    row = s.get_attempt("r1", 1)
    assert row is not None
    assert (row.started_at, row.started_from, row.ended_at, row.ended_from) == (
        T0 + 30,
        "poll",
        T0 + 500,
        "poll",
    )
    run = s.get_run("r1")
    assert run is not None
    lines = report_lines(run_report(s, run, now[0]))
    assert "  times of attempt 1 (start and end) are when Shepherd saw the change: Slurm gave none" in lines
    # sacct answers later (the exit code was owed): its End replaces the poll time, and says so.
    now[0] = T0 + 900
    s.observe_attempt("r1", 1, slurm_state="COMPLETED", reason=None, nodes="node1", ended_at=T0 + 480)
    row = s.get_attempt("r1", 1)
    assert row is not None and (row.ended_at, row.ended_from) == (T0 + 480, "slurm")


def test_a_start_slurm_rounds_down_to_before_the_attempts_intent_is_the_intent() -> None:
    """Slurm counts whole seconds: a job started within the second it was asked for reads as started before
    the daemon wrote its intent; the report would otherwise show a negative queue wait."""
    obs = sacct_row("2026-11-23T22:00:00", "2026-11-23T22:09:00")
    assert slurm_times(obs, started=True, ended=True, now=T0 + 3600, not_before=T0 + 0.4) == (
        T0 + 0.4,
        T0 + 540,
    )


def test_every_recorded_start_and_end_of_both_slurm_versions_is_read() -> None:
    """sacct's Start/End and squeue's %S as 22.05 and 24.11 print them (tests/data/slurm) all parse."""
    data = Path(__file__).parents[1] / "data" / "slurm"
    seen = 0
    for path in sorted(data.glob("*/sacct*.txt")):
        jobs, _ = parse_sacct(path.read_text())
        for job in jobs:
            for text in (job.start_time, job.end_time):
                if text:
                    assert parse_slurm_time(text) is not None, (path.name, text)
                    seen += 1
    assert seen > 20
