"""An attempt's progress becomes timeline marks once each: steps past the checkpoint it resumed from, the
stretches of validation and checkpointing, the first sign of training, Ray up; an earlier attempt's files
mark nothing."""

from __future__ import annotations

from supervisor.watch.marks import End, Mark, MarkTracker, Step

T0 = 1_000_000.0


def snapshot(phase: str, step: int, at: float, **more: object) -> dict[str, object]:
    return {"phase": phase, "state": phase, "step": step, "last_progress_at": at, "timestamp": at + 0.5,
            "started_at": T0 + 1} | more  # fmt: skip


def test_a_resumed_attempt_marks_only_the_steps_past_its_checkpoint() -> None:
    t = MarkTracker(baseline=10, not_before=T0)
    assert t.status(snapshot("starting", 10, T0 + 5), T0 + 6) == []
    assert t.status(snapshot("generating", 10, T0 + 8), T0 + 9) == [Mark("training", T0 + 8)]
    assert t.status(snapshot("training", 11, T0 + 12), T0 + 13) == [Step(11, T0 + 12)]
    assert t.status(snapshot("generating", 11, T0 + 13), T0 + 14) == []  # the next step begins
    assert t.metrics(11, 0.5, T0 + 12.1, timed=True) == [Step(11, T0 + 12.1, 0.5)]  # the reward joins
    assert t.metrics(9, 0.4, T0 + 12.2, timed=True) == []  # a kept row up to the checkpoint


def test_validation_and_checkpoint_saves_are_stretches_and_a_new_checkpoint_a_tick() -> None:
    t = MarkTracker(baseline=0, not_before=T0)
    t.status(snapshot("generating", 9, T0 + 1), T0 + 1)
    assert t.status(snapshot("validating", 10, T0 + 20), T0 + 21) == [
        Mark("validation", T0 + 20, lasting=True),
        Step(10, T0 + 20),
    ]
    assert t.status(snapshot("checkpointing", 10, T0 + 24), T0 + 25) == [
        End("validation", T0 + 24),
        Mark("checkpointing", T0 + 24, lasting=True),
    ]
    saved = snapshot("checkpointing", 10, T0 + 24, last_checkpoint="/ck/step_10", timestamp=T0 + 27)
    assert t.status(saved, T0 + 28) == [Mark("checkpoint", T0 + 27, step=10)]
    assert t.status(snapshot("generating", 10, T0 + 29), T0 + 30) == [End("checkpointing", T0 + 29)]


def test_the_previous_attempts_status_and_rows_mark_nothing() -> None:
    t = MarkTracker(baseline=10, not_before=T0)
    stale = snapshot("failed", 12, T0 - 50, started_at=T0 - 900)
    assert t.status(stale, T0 + 1) == []
    assert t.metrics(12, 0.7, T0 - 60, timed=True) == []  # written before this attempt was decided on
    assert t.metrics(12, 0.7, T0 + 60, timed=False) == [Step(12, T0 + 60, 0.7)]


def test_an_unknown_start_is_learnt_from_the_trainers_first_snapshot() -> None:
    t = MarkTracker(baseline=None, not_before=T0)
    assert t.status(snapshot("starting", 20, T0 + 2), T0 + 2) == []
    assert t.status(snapshot("training", 21, T0 + 9), T0 + 9) == [Mark("training", T0 + 9), Step(21, T0 + 9)]


def test_training_and_ray_up_are_marked_once_and_ray_never_before_the_attempt() -> None:
    t = MarkTracker(baseline=0, not_before=T0)
    assert t.ray_started(T0 - 3) == [Mark("ray_up", T0)]
    assert t.ray_started(T0 + 3) == []
    assert t.began_training(T0 + 4) == [Mark("training", T0 + 4)]
    assert t.began_training(T0 + 5) == []
