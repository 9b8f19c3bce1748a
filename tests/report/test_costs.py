"""The cost model: a run's wall-clock cut into consecutive phases that add up to it, allocated GPU-hours only
while a job held them, and each failure's cost (work redone since the kept checkpoint, detection,
resubmission, then the next attempt's queue wait and bring-up)."""

from __future__ import annotations

import dataclasses
import math

import pytest

from supervisor.report.costs import PHASES, AttemptFacts, Failure, attempt_segments, combine, cost

GPUS = 8.0


def demo_shape() -> list[AttemptFacts]:
    """The demo's run: a crash during step 12, resumed from step_10 five seconds after it was decided."""
    first = AttemptFacts(
        n=1,
        gpus=GPUS,
        submitted_at=0.0,
        started_at=10.0,
        ended_at=101.0,
        start_step=0,
        steps=tuple((s, 40.0 + 5 * s) for s in range(1, 12)),  # step 10 at 90, step 11 at 95
        ray_up_at=25.0,
        training_at=40.0,
        stretches=(("validation", 90.0, 93.0), ("checkpointing", 93.0, 95.0)),
        checkpoints=((10, 95.0),),
        failure=Failure("hf-cache-not-shared", "failure", failed_at=98.0, detected_at=98.5),
        kept_step=10,
    )
    second = AttemptFacts(
        n=2,
        gpus=GPUS,
        submitted_at=103.5,
        started_at=110.0,
        ended_at=210.0,
        start_step=10,
        steps=tuple((s, 130.0 + 5 * (s - 10)) for s in range(11, 25)),  # step 24 at 200
        training_at=130.0,
    )
    return [first, second]


def test_the_phases_of_a_crash_and_resume_add_up_to_the_wall_clock() -> None:
    c = cost(demo_shape(), now=1000.0)
    assert c.wall_s == 210.0
    assert sum(c.seconds.values()) == pytest.approx(c.wall_s)
    assert {p: round(v, 6) for p, v in c.seconds.items() if v} == {
        "queued": 10.0 + 6.5,
        "bring_up": 30.0 + 20.0,
        "productive": 50.0 + 70.0,  # to step_10's save, then all of attempt 2's steps
        "validation": 3.0,
        "checkpointing": 2.0,
        "redone": 3.0,  # step_10 saved at 95, the crash at 98: step 11 and a bit of 12 are done again
        "detection": 0.5,
        "resubmit": 5.0,  # the decision at 98.5 to attempt 2's submission (the job itself ended at 101)
        "teardown": 10.0,  # the last step at 200, the job's end at 210
    }


def test_gpu_hours_count_only_while_a_job_held_them_and_goodput_is_their_productive_share() -> None:
    c = cost(demo_shape(), now=1000.0)
    assert c.allocated_gpu_hours == pytest.approx((91.0 + 100.0) * GPUS / 3600)
    assert c.gpu_hours["queued"] == 0.0
    assert c.gpu_hours["resubmit"] == pytest.approx(2.5 * GPUS / 3600)  # 98.5 -> 101, then released
    assert c.goodput == pytest.approx(120.0 / 191.0)


def test_a_failure_costs_its_redone_work_detection_resubmission_and_the_next_queue_and_bring_up() -> None:
    c = cost(demo_shape(), now=1000.0)
    (f,) = c.failures
    assert (f.attempt, f.rule, f.steps_redone) == (1, "hf-cache-not-shared", 1)
    assert (f.redone_s, f.detection_s, f.resubmit_s, f.requeue_s, f.bring_up_s) == (3.0, 0.5, 5.0, 6.5, 20.0)
    assert f.shepherd_s == 5.5 and f.total_s == 35.0
    assert f.gpu_hours == pytest.approx((3.0 + 0.5 + 2.5 + 20.0) * GPUS / 3600)
    assert c.failures_by_rule == {"hf-cache-not-shared": 1}
    assert c.restarts == 1 and c.mtbf_s == pytest.approx(191.0)


def test_a_stall_is_detected_long_after_its_last_progress_and_all_its_unsaved_work_is_redone() -> None:
    stalled = AttemptFacts(
        n=1,
        gpus=GPUS,
        submitted_at=0.0,
        started_at=0.0,
        ended_at=2000.0,
        start_step=20,
        steps=((21, 110.0), (22, 120.0)),
        training_at=100.0,
        failure=Failure("rollouts-stalled", "stall", failed_at=125.0, detected_at=1925.0),
        kept_step=20,  # the next attempt resumed where this one had started
    )
    segs = attempt_segments(stalled, next_submitted=2060.0, now=5000.0)
    assert [(s.phase, s.start, s.end) for s in segs] == [
        ("bring_up", 0.0, 100.0),
        ("redone", 100.0, 125.0),
        ("detection", 125.0, 1925.0),
        ("resubmit", 1925.0, 2000.0),  # cancelled: the job ends
        ("resubmit", 2000.0, 2060.0),  # then the rest of the backoff
    ]


def test_an_old_job_still_ending_when_the_next_attempt_is_submitted_is_counted_once() -> None:
    first, second = demo_shape()
    first = dataclasses.replace(first, ended_at=106.0)  # still COMPLETING when attempt 2 was submitted
    c = cost([first, second], now=1000.0)
    assert sum(c.seconds.values()) == pytest.approx(c.wall_s) == 210.0
    assert c.seconds["resubmit"] == 5.0
    assert c.running_s == pytest.approx((103.5 - 10.0) + 100.0)


def test_a_failure_before_training_costs_bring_up_then_detection_past_the_jobs_end() -> None:
    early = AttemptFacts(
        n=1,
        gpus=GPUS,
        submitted_at=0.0,
        started_at=5.0,
        ended_at=50.0,
        failure=Failure("node-failure", "node_failure", failed_at=55.0, detected_at=55.0),
        kept_step=0,
    )
    segs = attempt_segments(early, next_submitted=70.0, now=100.0)
    assert [(s.phase, s.start, s.end) for s in segs] == [
        ("queued", 0.0, 5.0),
        ("bring_up", 5.0, 50.0),
        ("detection", 50.0, 55.0),  # the poll that saw NODE_FAIL came after the job's end
        ("resubmit", 55.0, 70.0),
    ]


def test_a_running_attempt_counts_up_to_now_as_productive() -> None:
    live = AttemptFacts(
        n=1, gpus=GPUS, submitted_at=0.0, started_at=10.0, steps=((1, 30.0),), training_at=20.0
    )
    c = cost([live], now=110.0)
    assert c.seconds["productive"] == 90.0 and c.seconds["bring_up"] == 10.0 and c.seconds["queued"] == 10.0
    assert c.goodput == pytest.approx(0.9)


def test_a_step_without_its_own_mark_is_placed_between_its_neighbours() -> None:
    f = AttemptFacts(
        n=1,
        gpus=1.0,
        submitted_at=0.0,
        started_at=0.0,
        ended_at=100.0,
        steps=((2, 20.0), (6, 60.0)),
        training_at=10.0,
        failure=Failure("nccl-error", "failure", 70.0, 71.0),
        kept_step=4,
    )
    segs = {s.phase: s for s in attempt_segments(f, None, now=200.0)}
    assert segs["productive"].end == 40.0 and segs["redone"].start == 40.0


def test_runs_combine_and_time_limits_are_no_failures_in_the_mtbf() -> None:
    chained = AttemptFacts(
        n=1,
        gpus=GPUS,
        submitted_at=0.0,
        started_at=0.0,
        ended_at=3600.0,
        failure=Failure("slurm-time-limit", "time_limit", 3600.0, 3601.0),
        kept_step=None,
    )
    one = cost(demo_shape(), now=1000.0)
    two = cost([chained], now=5000.0)
    both = combine([one, two])
    assert both.wall_s == one.wall_s + two.wall_s
    assert both.failures_by_rule == {"hf-cache-not-shared": 1, "slurm-time-limit": 1}
    assert both.mtbf_s == pytest.approx((191.0 + 3600.0) / 1)
    assert set(both.seconds) == set(PHASES)
    assert both.goodput is not None and not math.isnan(both.goodput)
