"""Whether an attempt's job may still be alive has one answer, used by every cancel and hold."""

from __future__ import annotations

import pytest

from supervisor.domain.jobstate import ACTIVE_STATES, TERMINAL_STATES, JobState
from supervisor.domain.runs import AttemptRow, AttemptState


def attempt(
    slurm_state: str | None, *, ended_at: float | None = None, job_id: str | None = "42"
) -> AttemptRow:
    return AttemptRow(
        "run-1", 1, "run-1:1", AttemptState.SUBMITTED, job_id, 0.0, 1.0, None, ended_at,
        slurm_state, None, None, None, None, None, None, None,
    )  # fmt: skip


@pytest.mark.parametrize("state", sorted(ACTIVE_STATES))
def test_a_job_in_any_active_state_is_live(state: JobState) -> None:
    assert attempt(state.value).live_job == "42"


def test_a_resizing_job_is_live_so_a_cancel_reaches_it() -> None:
    assert attempt("RESIZING").live_job == "42"


@pytest.mark.parametrize("state", sorted(TERMINAL_STATES | {JobState.UNKNOWN}))
def test_a_finished_or_unknown_job_is_not_live(state: JobState) -> None:
    assert attempt(state.value).live_job is None


def test_a_job_never_seen_in_squeue_counts_as_pending() -> None:
    assert attempt(None).live_job == "42"


def test_an_ended_attempt_or_one_without_a_job_has_no_live_job() -> None:
    assert attempt("RUNNING", ended_at=5.0).live_job is None
    assert attempt("RUNNING", job_id=None).live_job is None


def test_a_state_word_we_do_not_know_is_never_read_as_finished() -> None:
    assert attempt("SOME_FUTURE_STATE").live_job == "42"
