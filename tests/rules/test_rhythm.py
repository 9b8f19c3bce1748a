"""The learnt rhythm behind the `stalled` trigger (rules/rhythm.py), as a pure function of progress history:
each phase is held to its own silences once it has a history, start-up and new phases to the fixed bound,
and a heartbeat is never progress."""

from __future__ import annotations

import json

import pytest

from supervisor.rules.rhythm import (
    MAX_PHASES,
    MAX_SAMPLES,
    STARTUP,
    Learning,
    Rhythm,
    event_phase,
    phase_name,
    quantile,
)

FIXED = 1800.0
LEARN = Learning(k=3.0, floor_s=300.0, min_samples=5)


def status(rh: Rhythm, at: float, step: int, phase: str, done: float = 0.0, attempt: int = 1) -> bool:
    """What our trainer's status.json gives the matcher: a `step` event carrying the phase."""
    return rh.observe(attempt, "step", float(step), {"phase": phase, "phase_done": done}, at)


def trainer_steps(
    rh: Rhythm, t: float, first: int, last: int, gen: float = 40.0, train: float = 20.0, attempt: int = 1
) -> float:
    """Steps first..last of our trainer: generation (status step = the last completed one), training, then
    the step counter moves; returns the time after the last step."""
    for step in range(first, last + 1):
        status(rh, t, step - 1, "generating", attempt=attempt)
        status(rh, t + gen / 2, step - 1, "generating", done=8, attempt=attempt)  # a chunk of rollouts done
        status(rh, t + gen, step - 1, "training", attempt=attempt)
        t += gen + train
        status(rh, t, step, "training", attempt=attempt)  # the step is logged: the counter moves
    return t


def warm_run(gen: float = 40.0, train: float = 20.0, steps: int = 20) -> tuple[Rhythm, float]:
    rh = Rhythm()
    rh.begin(1, 0.0)
    status(rh, 10.0, 0, "starting")
    return rh, trainer_steps(rh, 100.0, 1, steps, gen, train)


def test_a_phase_without_history_is_held_to_the_fixed_bound_and_says_why() -> None:
    rh = Rhythm()
    rh.begin(1, 0.0)
    status(rh, 5.0, 0, "starting")
    v = rh.verdict(5.0 + 1799, FIXED, LEARN)
    assert v.phase == STARTUP and not v.learnt and not v.stalled
    v = rh.verdict(5.0 + FIXED, FIXED, LEARN)
    assert v.stalled and v.bound_s == FIXED
    assert "in startup at step 0" in v.describe() and "fixed bound of 30.0 min" in v.describe()
    assert "0 of the 5 startup attempts needed" in v.describe()


def test_a_hang_in_generation_after_60s_steps_is_declared_at_the_floor_not_after_half_an_hour() -> None:
    rh, t = warm_run()
    status(rh, t, 20, "generating")
    status(rh, t + 20, 20, "generating", done=8)  # then the rollout worker hangs
    hung_at = t + 20
    assert not rh.verdict(hung_at + 299, FIXED, LEARN).stalled
    v = rh.verdict(hung_at + 300, FIXED, LEARN)
    assert v.stalled and v.learnt and v.phase == "generation" and v.since == hung_at
    assert v.bound_s == 300.0  # max(3 x ~20 s, floor 5 min)
    assert v.expected_s is not None and 15 <= v.expected_s <= 25


def test_the_bound_is_k_times_the_p99_when_that_is_above_the_floor() -> None:
    rh, t = warm_run(gen=600.0, train=60.0, steps=8)  # long generation phases, the bar moving half-way
    status(rh, t, 8, "generating")
    v = rh.verdict(t + 10, FIXED, LEARN)
    assert v.learnt and v.expected_s == 300.0 and v.bound_s == 900.0


def test_the_stall_reason_names_the_phase_what_was_expected_and_how_overdue_it_is() -> None:
    rh, t = warm_run()
    status(rh, t, 20, "generating")
    v = rh.verdict(t + 400, FIXED, LEARN)
    text = v.describe()
    assert text.startswith("no progress for 6.7 min in generation at step 20: ")
    assert "generation shows progress within 20 s (p99 of 19)" in text
    assert "6.3 min overdue" in text and "learnt bound 5.0 min = max(3 x 20 s, floor 5.0 min)" in text


def test_a_heartbeat_is_not_progress() -> None:
    rh, t = warm_run()
    status(rh, t, 20, "generating")
    for beat in range(1, 40):  # status.json rewritten every 10 s by the trainer's heartbeat thread
        snapshot = {"phase": "generating", "phase_done": 0.0}
        moved = rh.observe(1, "status", 20.0, snapshot, t + 10 * beat)
        assert moved == (beat == 1)  # only the first `status` snapshot is new to its key
    assert rh.verdict(t + 400, FIXED, LEARN).stalled


def test_a_validation_five_times_a_step_is_judged_as_validation() -> None:
    rh, t = warm_run()
    # validations of 5 min every few steps: before five of them were seen, the fixed bound applies
    for n in range(6):
        status(rh, t, 20 + n * 2, "validating")
        v = rh.verdict(t + 299, FIXED, LEARN)
        assert v.phase == "validation" and not v.stalled
        if n < 5:
            assert not v.learnt and v.bound_s == FIXED
        t = trainer_steps(rh, t + 300, 21 + n * 2, 22 + n * 2)
    status(rh, t, 32, "validating")
    v = rh.verdict(t + 301, FIXED, LEARN)
    assert v.learnt and v.expected_s == 300.0 and v.bound_s == 900.0 and not v.stalled


def test_a_slow_checkpoint_save_is_learnt_as_checkpointing() -> None:
    rh, t = warm_run()
    for n in range(5):
        status(rh, t, 20 + n, "checkpointing")
        t = trainer_steps(rh, t + 240, 21 + n, 21 + n)
    status(rh, t, 25, "checkpointing")
    v = rh.verdict(t + 500, FIXED, LEARN)
    assert v.phase == "checkpointing" and v.learnt and v.bound_s == 720.0 and not v.stalled


def test_start_up_lasts_until_the_first_completed_step_and_a_slow_first_step_is_not_a_stall() -> None:
    rh = Rhythm()
    rh.begin(1, 0.0)
    status(rh, 30.0, 0, "starting")
    status(rh, 60.0, 0, "generating")  # the first step compiles and warms vLLM up for 20 minutes
    v = rh.verdict(60.0 + 20 * 60, FIXED, LEARN)
    assert v.phase == STARTUP and not v.stalled
    status(rh, 60.0 + 21 * 60, 1, "training")  # step 1 is done: start-up is over
    assert rh.phase == "training" and rh.warm
    assert rh.samples[STARTUP] == [60.0 + 21 * 60]


def test_a_new_attempt_starts_up_again_but_keeps_what_the_run_taught() -> None:
    rh, t = warm_run()
    rh.begin(2, t + 100)
    assert rh.phase == STARTUP and not rh.warm and len(rh.samples["generation"]) == 19  # step 1: start-up
    status(rh, t + 150, 20, "starting", attempt=2)
    status(rh, t + 200, 20, "generating", attempt=2)
    assert rh.verdict(t + 200 + 600, FIXED, LEARN).phase == STARTUP  # resumed: warm-up again, fixed bound
    t2 = trainer_steps(rh, t + 300, 21, 21, attempt=2)
    status(rh, t2, 21, "generating", attempt=2)
    v = rh.verdict(t2 + 300, FIXED, LEARN)
    assert v.learnt and v.stalled and v.samples == 19  # attempt 2's first step was its start-up


def test_an_observation_of_another_attempt_starts_it() -> None:
    rh, t = warm_run()
    status(rh, t + 50, 20, "starting", attempt=3)
    assert rh.attempt == 3 and rh.phase == STARTUP and rh.started == t + 50


def test_nemo_rl_banners_alone_learn_whole_steps_and_checkpoint_and_validation_lines_their_phases() -> None:
    rh = Rhythm()
    rh.begin(1, 0.0)
    t = 300.0
    for step in range(1, 12):
        assert rh.observe(1, "step", float(step), {}, t)
        if step % 5 == 0:
            rh.observe(1, "validation", float(step), {}, t + 80)
            rh.observe(1, "checkpoint", float(step), {}, t + 200)
            t += 200
        t += 90
    assert rh.phase == "step" and rh.samples["step"] == [90.0, 90.0, 90.0, 80.0, 90.0, 90.0, 90.0, 90.0, 80.0]
    assert rh.samples["validation"] == [120.0, 120.0] and rh.samples["checkpointing"] == [90.0, 90.0]
    v = rh.verdict(t - 90 + 299, FIXED, LEARN)  # step 11 began at t - 90
    assert v.learnt and v.expected_s == 90.0 and v.bound_s == 300.0 and not v.stalled


def test_what_a_rhythm_learnt_survives_a_round_trip_through_json() -> None:
    rh, t = warm_run()
    status(rh, t, 20, "generating")
    back = Rhythm.from_dict(json.loads(json.dumps(rh.to_dict())))
    assert back == rh
    assert back.verdict(t + 300, FIXED, LEARN) == rh.verdict(t + 300, FIXED, LEARN)


@pytest.mark.parametrize(
    "garbage",
    [
        {},
        {"samples": "x", "positions": 3, "attempt": "two"},
        {"samples": {"generation": ["a", None, 1.5, float("nan")]}, "last_beat": "now", "warm": 1},
    ],
)
def test_a_damaged_saved_rhythm_loads_as_what_can_be_read(garbage: dict[str, object]) -> None:
    rh = Rhythm.from_dict(garbage)
    assert rh.attempt == 0 and rh.phase == STARTUP
    assert rh.samples.get("generation", [1.5]) == [1.5]


def test_samples_and_phases_are_bounded() -> None:
    rh, t = warm_run(steps=MAX_SAMPLES + 30)
    assert len(rh.samples["generation"]) == MAX_SAMPLES
    for i in range(MAX_PHASES + 10):
        status(rh, t + i, MAX_SAMPLES + 30, f"phase {i}")
    assert len(rh.samples) == MAX_PHASES


def test_phase_words_of_the_trainers_map_to_ours() -> None:
    assert [phase_name(w) for w in ("generating", "Validating", "checkpointing", "starting", "stopped")] == [
        "generation",
        "validation",
        "checkpointing",
        STARTUP,
        "ending",
    ]
    assert phase_name("Reference logprobs!") == "reference_logprobs"
    assert event_phase("rollouts", {}) == "generation" and event_phase("bar:x", {}) is None
    assert event_phase("step", {}) == "step" and event_phase("status", {}) is None


def test_the_p99_of_few_samples_is_their_maximum() -> None:
    assert quantile([1.0, 9.0, 3.0], 0.99) == 9.0
    assert quantile([float(i) for i in range(1, 201)], 0.99) == 198.0


def test_where_status_json_shows_phases_a_banner_opens_none_so_a_silent_validation_is_not_a_step() -> None:
    """Our trainer writes both: the banner (`step`, no phase) and status.json's phases. Banner after the
    status said `validating`, then 2.5 silent minutes: that is validation's silence, not a step's."""
    rh, t = warm_run()  # status.json phases: generation and training learnt
    for n in range(3):
        status(rh, t, 20 + n, "validating")
        assert rh.observe(1, "step", 20.0 + n, {}, t + 0.5)  # the banner, read just after: a beat
        assert rh.phase == "validation"
        t = trainer_steps(rh, t + 150, 21 + n, 21 + n)
    assert "step" not in rh.samples
    assert rh.samples["validation"][-3:] == [149.5, 149.5, 149.5]
    assert max(rh.samples["generation"]) < 60
