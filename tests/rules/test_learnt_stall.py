"""The shipped `rollouts-stalled` rule learns the run's rhythm: a hung run with 60 s steps is declared at the
4.5 min floor instead of after 30 min, a long validation or checkpoint save is judged as what it is, and the
reason says the phase, how overdue it is and what was expected."""

from __future__ import annotations

import pytest

from supervisor.domain.jobstate import JobState
from supervisor.domain.observations import ProgressEvent, StateEvent, Tick
from supervisor.rules.engine import Match, MatcherState, RuleSet, feed, load_ruleset, note_files


@pytest.fixture(scope="module")
def rs() -> RuleSet:
    return load_ruleset()


def _running(rs: RuleSet, st: MatcherState, at: float) -> None:
    feed(rs, st, StateEvent("r1", st.attempt, "4242", JobState.RUNNING, nodes="node[1-2]", at=at))
    note_files(st, ["STARTED_RAY_HEAD", "ray-driver.log"])


def _stalls(rs: RuleSet, st: MatcherState, ev: ProgressEvent | Tick) -> list[Match]:
    return [m for m in feed(rs, st, ev) if m.rule == "rollouts-stalled"]


def _banner(step: int, at: float) -> ProgressEvent:
    return ProgressEvent("r1", 1, "step", float(step), 100.0, at=at)


def test_a_run_of_60s_steps_that_hangs_at_step_50_is_declared_within_5_min_not_30(rs: RuleSet) -> None:
    st = MatcherState(run_id="r1", attempt=1)
    _running(rs, st, 0.0)
    t = 600.0  # ten minutes of start-up (model load, vLLM warm-up) before step 1's banner
    for step in range(1, 51):
        assert _stalls(rs, st, _banner(step, t)) == []
        t += 60.0
    hung_since = t - 60.0  # step 50 began and never ended
    assert _stalls(rs, st, Tick(hung_since + 269)) == []
    (m,) = _stalls(rs, st, Tick(hung_since + 270))
    assert m.evidence.phase == "step" and m.evidence.since == hung_since
    assert m.evidence.expected_s == 60.0 and m.evidence.bound_s == 270.0
    assert "in step at step 50" in m.reason and "3.5 min overdue" in m.reason
    assert "within 60 s (p99 of" in m.reason and "(last step=50)" in m.reason
    assert m.node is None  # two nodes, and a silence names none of them (forensics may)
    assert _stalls(rs, st, Tick(hung_since + 900)) == []  # once per stretch


def test_before_five_steps_the_fixed_half_hour_applies(rs: RuleSet) -> None:
    st = MatcherState(run_id="r1", attempt=1)
    _running(rs, st, 0.0)
    for step in range(1, 4):
        assert _stalls(rs, st, _banner(step, 60.0 * step)) == []
    assert _stalls(rs, st, Tick(180.0 + 29 * 60)) == []
    (m,) = _stalls(rs, st, Tick(180.0 + 30 * 60))
    assert m.evidence.bound_s == 1800.0 and m.evidence.expected_s is None
    assert "fixed bound of 30.0 min" in m.reason


def test_validations_five_times_a_step_and_slow_checkpoint_saves_never_fire(rs: RuleSet) -> None:
    """NeMo RL's lines: a banner per step, `Starting validation at step N` every 10 steps (5 min), then a
    checkpoint save (4 min); a whole healthy run of 100 steps raises nothing."""
    st = MatcherState(run_id="r1", attempt=1)
    _running(rs, st, 0.0)
    t = 300.0
    for step in range(1, 101):
        assert _stalls(rs, st, _banner(step, t)) == []
        for tick in range(10, 60, 10):
            assert _stalls(rs, st, Tick(t + tick)) == []
        t += 60.0
        if step % 10 == 0:
            assert _stalls(rs, st, ProgressEvent("r1", 1, "validation", float(step), at=t)) == []
            for tick in range(30, 300, 30):
                assert _stalls(rs, st, Tick(t + tick)) == []
            t += 300.0
            assert _stalls(rs, st, ProgressEvent("r1", 1, "checkpoint", float(step), at=t)) == []
            for tick in range(30, 240, 30):
                assert _stalls(rs, st, Tick(t + tick)) == []
            t += 240.0
    assert len(st.rhythms["rollouts-stalled#0"].samples["validation"]) == 10


def test_a_hang_inside_a_learnt_validation_is_held_to_the_validation_bound(rs: RuleSet) -> None:
    st = MatcherState(run_id="r1", attempt=1)
    _running(rs, st, 0.0)
    t = 300.0
    for step in range(1, 61):
        _stalls(rs, st, _banner(step, t))
        t += 60.0
        if step % 10 == 0:
            _stalls(rs, st, ProgressEvent("r1", 1, "validation", float(step), at=t))
            if step == 60:
                break  # the sixth validation hangs
            t += 300.0
    assert _stalls(rs, st, Tick(t + 899)) == []
    (m,) = _stalls(rs, st, Tick(t + 900))
    assert m.evidence.phase == "validation" and m.evidence.expected_s == 300.0
    assert "validation shows progress within 5.0 min" in m.reason
