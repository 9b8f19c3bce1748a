"""The metric trigger conditions (rules/model.py, evaluated in rules/matcher.py): each condition alone as a
pure function, then streams through the engine for what only a stream shows (stretches, once per stretch,
a rewound history, the step a stretch began at)."""

from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from supervisor.domain.observations import MetricEvent
from supervisor.rules.engine import Match, MatcherState, compile_rules, feed
from supervisor.rules.loader import load_rules_text
from supervisor.rules.matcher import metric_condition
from supervisor.rules.model import MetricTrigger


def trig(**kw: object) -> MetricTrigger:
    return MetricTrigger.model_validate({"tag": "train:x", **kw})


def test_nan_and_inf_are_nan_but_a_large_finite_value_is_not() -> None:
    t = trig(condition="nan")
    assert metric_condition(t, [0.1, math.nan], None)[0]
    assert metric_condition(t, [0.1, -math.inf], None)[0]
    assert not metric_condition(t, [0.1, 1e30], None)[0]


def test_thresholds_compare_the_mean_of_the_window_and_wait_for_a_full_window() -> None:
    t = trig(condition=">", threshold=0.9, window=3)
    assert not metric_condition(t, [1.0, 1.0], None)[0]  # not enough steps yet
    assert not metric_condition(t, [0.7, 1.0, 1.0], None)[0]  # mean 0.9 is not above 0.9
    assert metric_condition(t, [0.8, 0.95, 1.0], None)[0]
    assert not metric_condition(t, [1.0, math.nan, 1.0], None)[0]  # a NaN is the NaN rule's business


def test_below_fraction_of_best_needs_the_best_to_reach_the_floor() -> None:
    t = trig(condition="below_fraction_of_best", threshold=0.5, window=2, floor=0.2)
    assert metric_condition(t, [0.9, 0.3, 0.2], 0.8)[0]  # mean 0.25 < 0.4
    assert not metric_condition(t, [0.9, 0.5, 0.4], 0.8)[0]  # mean 0.45 >= 0.4
    assert not metric_condition(t, [0.1, 0.02, 0.03], 0.1)[0]  # never learned: best 0.1 < floor
    assert not metric_condition(t, [0.5, 0.3], None)[0]  # no best yet


def test_spike_is_relative_to_the_median_before_it_and_above_the_floor() -> None:
    t = trig(condition="spike", threshold=5, window=4, floor=1.0)
    assert metric_condition(t, [0.3, 0.4, 0.5, 0.35, 9.0], None)[0]
    assert not metric_condition(t, [0.3, 0.4, 0.5, 0.35, 1.8], None)[0]  # 4.8x the median 0.375
    assert not metric_condition(t, [0.01, 0.02, 0.01, 0.02, 0.5], None)[0]  # 33x, but under the floor
    assert not metric_condition(t, [0.4, 0.5, 9.0], None)[0]  # too little history
    assert not metric_condition(t, [0.0, 0.0, 0.0, 0.0, 3.0], None)[0]  # a zero median defines no spike


def test_drop_from_best_is_absolute_and_respects_lower_is_better() -> None:
    up = trig(condition="drop_from_best", threshold=0.1)
    assert metric_condition(up, [0.69], 0.8)[0] and not metric_condition(up, [0.71], 0.8)[0]
    down = trig(condition="drop_from_best", threshold=0.1, higher_is_better=False)
    assert metric_condition(down, [0.61], 0.5)[0] and not metric_condition(down, [0.59], 0.5)[0]


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"condition": ">"}, "needs a threshold"),
        ({"condition": "below_fraction_of_best", "threshold": 1.5}, "a fraction of the best"),
        ({"condition": "spike", "threshold": 0.5}, "above 1"),
        ({"condition": "nan", "window": 0}, "greater than or equal to 1"),
        ({"condition": "nan", "window": 51}, "less than or equal to 50"),
        ({"condition": "rolling"}, "Input should be"),
    ],
)
def test_bad_metric_triggers_are_refused_with_a_reason(fields: dict[str, object], error: str) -> None:
    with pytest.raises(ValidationError, match=error):
        trig(**fields)


RULES = """
rules:
  - name: collapse
    description: reward collapsed
    trigger: {kind: metric, tag: "train:reward", condition: below_fraction_of_best, threshold: 0.5,
              window: 2, for_steps: 3, floor: 0.2}
    actions: [{alert: {message: "{run}: {reason}"}}]
"""


def stream(values: list[float], tag: str = "train:reward", start: int = 1) -> list[Match]:
    rs = compile_rules(load_rules_text(RULES, "r.yaml").rules)
    st = MatcherState(run_id="r1", attempt=1)
    out: list[Match] = []
    for i, v in enumerate(values):
        out += feed(rs, st, MetricEvent("r1", 1, tag, start + i, v, at=float(i)))
    return out


def test_a_stretch_must_last_for_steps_and_fires_once_naming_where_it_began() -> None:
    ms = stream([0.2, 0.6, 0.8, 0.8, 0.3, 0.2, 0.2, 0.1, 0.1, 0.1, 0.1])
    (m,) = ms
    assert m.evidence.metric == "train:reward"
    # window means: step 6 is the first below 0.4 (0.25), so the stretch began there; 3 steps -> step 8
    assert m.evidence.step == 6 and "at step 8" in m.reason and "for 3 steps since step 6" in m.reason
    assert m.evidence.lines[-1] == "step 8: train:reward = 0.1"


def test_a_short_dip_does_not_fire() -> None:
    assert stream([0.8, 0.8, 0.3, 0.2, 0.8, 0.8, 0.2, 0.2, 0.8]) == []


def test_a_rewound_history_starts_over_from_the_rewritten_steps() -> None:
    rs = compile_rules(load_rules_text(RULES, "r.yaml").rules)
    st = MatcherState(run_id="r1", attempt=1)
    for step, v in enumerate([0.8, 0.8, 0.2, 0.2], start=1):
        feed(rs, st, MetricEvent("r1", 1, "train:reward", step, v))
    assert st.metric_streak  # two steps into a stretch
    feed(rs, st, MetricEvent("r1", 1, "train:reward", 2, 0.8))  # a resume rewrote the history from step 2
    assert [s for s, _ in st.metric_recent["train:reward"]] == [1, 2]
    assert not st.metric_streak


def test_metric_state_survives_a_restart() -> None:
    rs = compile_rules(load_rules_text(RULES, "r.yaml").rules)
    st = MatcherState(run_id="r1", attempt=1)
    for step, v in enumerate([0.8, 0.8, 0.2, 0.2, 0.1], start=1):
        feed(rs, st, MetricEvent("r1", 1, "train:reward", step, v))
    again = MatcherState.from_dict(st.to_dict())
    (m,) = feed(rs, again, MetricEvent("r1", 1, "train:reward", 6, 0.1))
    assert m.rule == "collapse" and m.evidence.step == 4


def test_a_floor_arms_a_threshold_only_once_the_best_was_on_the_healthy_side() -> None:
    pinned = trig(condition=">", threshold=0.9, higher_is_better=False, floor=0.5)
    assert not metric_condition(pinned, [1.0], 1.0)[0]  # cut off from the start: by design, not a collapse
    assert metric_condition(pinned, [1.0], 0.2)[0]  # it used to finish its answers


def test_scalars_logged_before_the_attempt_started_are_history_not_news() -> None:
    """A resumed attempt first reads the metrics file its predecessor left: the NaN that ended it is old."""
    nan = """
rules:
  - name: nan-loss
    trigger: {kind: metric, tag: "train:loss", condition: nan}
    actions: [{alert: {}}]
"""
    rs = compile_rules(load_rules_text(nan, "n.yaml").rules)
    st = MatcherState(run_id="r1", attempt=2, running_since=1000.0)
    assert feed(rs, st, MetricEvent("r1", 2, "train:loss", 33, math.nan, at=990.0)) == []
    assert [s for s, _ in st.metric_recent["train:loss"]] == [33]  # kept as history
    feed(rs, st, MetricEvent("r1", 2, "train:loss", 32, 0.4, at=980.0))  # the trainer rewrote its history
    (m,) = feed(rs, st, MetricEvent("r1", 2, "train:loss", 33, math.nan, at=1010.0))  # it diverged again
    assert m.rule == "nan-loss" and m.evidence.step == 33
