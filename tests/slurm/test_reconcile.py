"""Reconciliation: unknown is never failed, tags beat job ids, intents settle by tag."""

from dataclasses import replace

from supervisor.domain.jobstate import JobState
from supervisor.domain.runs import AttemptRow, AttemptState
from supervisor.slurm.parse import JobObservation, make_comment, make_job_name
from supervisor.slurm.reconcile import (
    UpdateKind,
    adopted_tag,
    in_place_origin,
    in_place_tag,
    reconcile,
    sacct_needed,
)


def attempt(
    n: int = 1,
    state: AttemptState = AttemptState.SUBMITTED,
    job_id: str | None = "10",
    unknown_since: float | None = None,
) -> AttemptRow:
    return AttemptRow(
        "r1",
        n,
        make_job_name("r1", n),
        state,
        job_id,
        0.0,
        1.0,
        None,
        None,
        None,
        None,
        None,
        None,
        None,
        None,
        unknown_since,
        None,
    )


def obs(
    job_id: str, state: JobState, n: int = 1, run: str = "r1", exit_code: int | None = None
) -> JobObservation:
    return JobObservation(
        job_id, make_job_name(run, n), state, comment=make_comment(run, n), exit_code=exit_code
    )


def test_running_job_is_observed() -> None:
    [u] = reconcile([attempt()], [obs("10", JobState.RUNNING)], [], now=100, grace_s=60)
    assert u.kind is UpdateKind.OBSERVED and u.obs is not None and u.obs.state is JobState.RUNNING


def test_missing_everywhere_is_unknown_only_after_the_grace_period() -> None:
    [first] = reconcile([attempt()], [], [], now=100, grace_s=60)
    assert first.kind is UpdateKind.MISSING and first.missing_since == 100
    [later] = reconcile([attempt(unknown_since=100)], [], [], now=159, grace_s=60)
    assert later.kind is UpdateKind.MISSING
    [past] = reconcile([attempt(unknown_since=100)], [], [], now=161, grace_s=60)
    assert past.kind is UpdateKind.UNKNOWN


def test_nothing_is_concluded_when_sacct_could_not_be_asked() -> None:
    assert reconcile([attempt()], [], None, now=10_000, grace_s=1) == []
    assert reconcile([attempt(state=AttemptState.INTENT, job_id=None)], [], None, now=10_000, grace_s=1) == []


def test_a_reused_job_id_with_another_tag_is_not_our_job() -> None:
    stranger = obs("10", JobState.COMPLETED, run="someone-else")
    [u] = reconcile([attempt()], [stranger], [], now=100, grace_s=60)
    assert u.kind is UpdateKind.MISSING


def test_terminal_state_with_exit_code_from_sacct_ends_the_attempt() -> None:
    done = obs("10", JobState.FAILED, exit_code=3)
    [u] = reconcile([attempt()], [obs("10", JobState.FAILED)], [done], now=100, grace_s=60)
    assert u.kind is UpdateKind.ENDED and u.obs is not None and u.obs.exit_code == 3


def test_terminal_in_squeue_waits_briefly_for_sacct_then_settles() -> None:
    [wait] = reconcile([attempt()], [obs("10", JobState.TIMEOUT)], [], now=100, grace_s=600)
    assert wait.kind is UpdateKind.OBSERVED and wait.missing_since == 100
    [settle] = reconcile(
        [attempt(unknown_since=100)], [obs("10", JobState.TIMEOUT)], [], now=131, grace_s=600
    )
    assert settle.kind is UpdateKind.ENDED


def test_a_terminal_state_in_squeue_settles_even_while_sacct_is_down() -> None:
    [wait] = reconcile([attempt()], [obs("10", JobState.COMPLETED)], None, now=100, grace_s=600)
    assert wait.kind is UpdateKind.OBSERVED
    [settle] = reconcile(
        [attempt(unknown_since=100)], [obs("10", JobState.COMPLETED)], None, now=131, grace_s=600
    )
    assert settle.kind is UpdateKind.ENDED and settle.obs is not None and settle.obs.exit_code is None


def test_an_intent_is_found_by_tag_or_proven_never_submitted() -> None:
    intent = attempt(state=AttemptState.INTENT, job_id=None)
    [found] = reconcile([intent], [obs("11", JobState.PENDING)], [], now=5, grace_s=60)
    assert found.kind is UpdateKind.FOUND and found.obs is not None and found.obs.job_id == "11"
    [never] = reconcile([intent], [], [], now=5, grace_s=60)
    assert never.kind is UpdateKind.NEVER_SUBMITTED


def test_an_intent_in_flight_in_this_process_is_left_alone() -> None:
    intent = attempt(state=AttemptState.INTENT, job_id=None)
    assert reconcile([intent], [], [], now=5, grace_s=60, in_flight=frozenset({("r1", 1)})) == []


def test_sacct_is_asked_only_for_jobs_that_left_the_queue_or_ended() -> None:
    a1, a2, a3 = attempt(1, job_id="10"), attempt(2, job_id="11"), attempt(3, job_id="12")
    squeue = [obs("10", JobState.RUNNING, n=1), obs("11", JobState.COMPLETED, n=2)]
    assert sacct_needed([a1, a2, a3], squeue) == ["11", "12"]


def adopted(job_id: str = "77") -> AttemptRow:
    """Attempt 1 of a run adopted from a job submitted by hand: its job carries no tag of ours."""
    return replace(attempt(job_id=job_id), tag=adopted_tag(job_id))


def test_an_adopted_job_is_followed_by_its_id_since_it_has_no_tag_of_ours() -> None:
    by_hand = JobObservation(
        "77", "ray-job", JobState.RUNNING
    )  # `COMMAND=... sbatch ray.sub`: NeMo RL's name
    [u] = reconcile([adopted()], [by_hand], [], now=0.0, grace_s=600)
    assert u.kind == UpdateKind.OBSERVED and u.obs is by_hand
    ended = JobObservation("77", "ray-job", JobState.FAILED, exit_code=1, source="sacct")
    assert sacct_needed([adopted()], []) == ["77"]
    [done] = reconcile([adopted()], [], [ended], now=0.0, grace_s=600)
    assert done.kind == UpdateKind.ENDED and done.obs is ended


def test_a_tagged_attempt_is_never_matched_by_id_alone() -> None:
    other = JobObservation("10", "someone-else", JobState.RUNNING)  # the id, but not our tag
    [u] = reconcile([attempt(job_id="10")], [other], [], now=0.0, grace_s=600)
    assert u.kind == UpdateKind.MISSING


def test_a_driver_run_restarted_in_place_is_found_by_the_tag_of_the_job_it_runs_in() -> None:
    second = replace(attempt(n=2), tag=in_place_tag("r1", 2, origin=1))
    assert in_place_origin(second.tag) == 1 and in_place_origin(make_job_name("r1", 2)) is None
    [u] = reconcile([second], [obs("10", JobState.RUNNING, n=1)], [], now=100, grace_s=60)
    assert u.kind is UpdateKind.OBSERVED
    # The same tag on another job id (a reused id, a requeue under a new id) is not the job it runs in.
    [gone] = reconcile([second], [obs("11", JobState.RUNNING, n=1)], [], now=100, grace_s=60)
    assert gone.kind is UpdateKind.MISSING
