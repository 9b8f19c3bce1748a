"""How one reconciled Slurm update moves an attempt and its run (decide/transitions.py), without SQLite."""

from __future__ import annotations

from typing import Any

import pytest

from supervisor.decide.transitions import NEVER_SUBMITTED_MESSAGE, transition
from supervisor.domain.jobstate import JobState
from supervisor.domain.runs import AttemptRow, AttemptState, RunRow, RunState
from supervisor.slurm.parse import JobObservation
from supervisor.slurm.reconcile import AttemptUpdate, UpdateKind

NOW = 5000.0


def run(state: RunState = RunState.PENDING, *, held: bool = False) -> RunRow:
    return RunRow("r1", "r", "{}", "spec.yaml", state, 0.0, 0.0, None, None, None, held)


def attempt(state: AttemptState = AttemptState.SUBMITTED, **kw: Any) -> AttemptRow:
    fields: dict[str, Any] = {
        "run_id": "r1", "n": 2, "tag": "t2", "state": state, "job_id": "77", "intent_at": 0.0,
        "submitted_at": 1.0, "started_at": None, "ended_at": None, "slurm_state": "PENDING",
        "reason": "Priority", "exit_code": None, "nodes": None, "checkpoint": None,
        "overrides_json": '{"env": {"A": "1"}}', "unknown_since": None, "last_seen_at": None,
    }  # fmt: skip
    return AttemptRow(**(fields | kw))


def obs(
    state: JobState, *, reason: str = "", exit_code: int | None = None, source: str = "squeue"
) -> JobObservation:
    return JobObservation(
        "77", "shep-r1-a2", state, reason=reason, nodes="node1", start_time="2026-01-01T00:00:00",
        exit_code=exit_code, source=source,
    )  # fmt: skip


def update(
    kind: UpdateKind, o: JobObservation | None = None, missing_since: float | None = None
) -> AttemptUpdate:
    return AttemptUpdate("r1", 2, kind, o, missing_since)


def go(u: AttemptUpdate, r: RunRow | None = None, a: AttemptRow | None = None, **kw: Any) -> Any:
    return transition(u, r or run(), a or attempt(), now=NOW, grace_s=600, **kw)


def test_an_intents_job_found_by_its_tag_records_the_job_id() -> None:
    tr = go(update(UpdateKind.FOUND, obs(JobState.PENDING)), a=attempt(AttemptState.INTENT, job_id=None))
    assert tr.attempt.kind == "submitted" and tr.attempt.job_id == "77" and tr.run is None


def test_an_intent_slurm_never_heard_of_is_queued_again_with_its_overrides() -> None:
    tr = go(update(UpdateKind.NEVER_SUBMITTED), r=run(RunState.SUBMITTING), a=attempt(AttemptState.INTENT))
    assert tr.attempt.kind == "never_submitted" and tr.attempt.message == NEVER_SUBMITTED_MESSAGE
    assert tr.run.state == RunState.QUEUED and tr.run.next_attempt == {"env": {"A": "1"}}
    assert tr.wake_scheduler


def test_an_intent_of_a_cancelled_run_is_recorded_but_never_resubmitted() -> None:
    tr = go(update(UpdateKind.NEVER_SUBMITTED), r=run(RunState.CANCELLED), a=attempt(AttemptState.INTENT))
    assert tr.attempt.kind == "never_submitted" and tr.run is None and not tr.wake_scheduler


@pytest.mark.parametrize("kind", [UpdateKind.FOUND, UpdateKind.NEVER_SUBMITTED])
def test_an_intent_settled_meanwhile_is_left_alone(kind: UpdateKind) -> None:
    assert go(update(kind, obs(JobState.PENDING))).changes_nothing


def test_a_job_missing_from_slurm_is_unknown_not_finished_until_the_grace_period_ends() -> None:
    missing = go(update(UpdateKind.MISSING, missing_since=NOW - 30), a=attempt(slurm_state="RUNNING"))
    assert missing.attempt.slurm_state == "RUNNING" and missing.attempt.unknown_since == NOW - 30
    assert not missing.attempt.ended and missing.run is None and missing.observation is None
    assert missing.log[0] == "warning"  # said once, when it first goes missing
    again = go(update(UpdateKind.MISSING, missing_since=NOW - 30), a=attempt(unknown_since=NOW - 30))
    assert again.log is None
    gone = go(update(UpdateKind.UNKNOWN), r=run(RunState.RUNNING))
    assert gone.attempt.kind == "unknown" and gone.run.state == RunState.LOST
    assert gone.observation.state == JobState.UNKNOWN and "vanished" in gone.run.reason


def test_a_lost_job_of_a_finished_run_does_not_change_the_run() -> None:
    assert go(update(UpdateKind.UNKNOWN), r=run(RunState.COMPLETED)).run is None


def test_a_job_that_starts_running_makes_the_run_running_and_says_where() -> None:
    tr = go(update(UpdateKind.OBSERVED, obs(JobState.RUNNING)))
    assert tr.run.state == RunState.RUNNING and tr.run.event[0] == "running"
    assert tr.notice.kind == "started" and "node1" in tr.notice.title
    assert tr.attempt.started and not tr.attempt.ended
    assert tr.observation.state == JobState.RUNNING  # the rules see every change


def test_a_held_run_stays_held_while_its_job_pends_and_nothing_new_is_not_a_change() -> None:
    assert (
        go(
            update(UpdateKind.OBSERVED, obs(JobState.PENDING, reason="JobHeldUser")),
            r=run(RunState.HELD, held=True),
        ).run
        is None
    )
    same = go(update(UpdateKind.OBSERVED, obs(JobState.PENDING, reason="Priority")))
    assert same.observation is None and same.run is None and same.attempt is not None


def test_a_run_waiting_to_resume_is_not_moved_by_its_old_jobs_last_states() -> None:
    assert go(update(UpdateKind.OBSERVED, obs(JobState.RUNNING)), r=run(RunState.BACKOFF)).run is None


def test_an_end_with_its_exit_code_is_recorded_and_handed_to_the_rules() -> None:
    tr = go(
        update(UpdateKind.ENDED, obs(JobState.FAILED, exit_code=3, source="sacct")), r=run(RunState.RUNNING)
    )
    assert tr.ended and tr.attempt.ended and tr.attempt.exit_code == 3
    assert tr.history == (
        "ended",
        "attempt 2 ended FAILED exit 3",
        {"state": "FAILED", "exit_code": 3, "signal": None, "exit_code_owed": False},
    )
    assert tr.observation.exit_code == 3


def test_a_job_killed_by_a_signal_ends_with_the_signal_not_exit_0() -> None:
    # sacct's `0:125` after an OOM kill: status 0, signal 125 (`0:9` without cgroups: SIGKILL).
    killed = JobObservation(
        "77", "shep-r1-a2", JobState.OUT_OF_MEMORY, exit_code=0, signal=125, source="sacct"
    )
    tr = go(update(UpdateKind.ENDED, killed), r=run(RunState.RUNNING))
    assert tr.history[1] == "attempt 2 ended OUT_OF_MEMORY signal 125"
    assert (tr.attempt.exit_code, tr.attempt.exit_signal) == (0, 125)
    assert tr.observation.signal == 125


@pytest.mark.parametrize(
    ("accounting_down", "why"),
    [(True, "Slurm accounting (sacct) unavailable"), (False, "sacct has no record of the job yet")],
)
def test_an_end_settled_on_squeues_word_says_why_its_exit_code_is_owed(
    accounting_down: bool, why: str
) -> None:
    tr = go(update(UpdateKind.ENDED, obs(JobState.COMPLETED)), accounting_down=accounting_down)
    _kind, message, data = tr.history
    assert why in message and data["exit_code_owed"] is True
    assert tr.log[2].get("exit_code_owed") is True
