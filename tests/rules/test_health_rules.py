"""The RL training-health rules of the default rules on realistic metric streams (Shepherd's names).

Healthy streams must stay quiet: the recorded 100 steps of our trainer's toy run (examples/toy-grpo.yaml,
tests/data/metric-streams/) and noisy synthetic GRPO runs (a learning curve with step noise, lognormal grad
norms, rare one-step logprob-error spikes as MoE runs show, binomial validation noise). Each rule then fires
on its failure injected into the same stream, naming where the failure began.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable
from pathlib import Path

import pytest

from supervisor.domain.observations import MetricEvent
from supervisor.rules.engine import Match, MatcherState, RuleSet, feed, load_ruleset
from supervisor.watch.metric_names import canonical

Row = dict[str, float]
STREAMS = Path(__file__).resolve().parents[1] / "data" / "metric-streams"
HEALTH = {
    "nan-loss",
    "reward-collapse",
    "policy-mismatch",
    "grad-norm-spike",
    "response-length-collapse",
    "response-length-pinned",
    "no-learning-signal",
    "validation-regression",
}
K = 150  # the step an injected failure begins at


@pytest.fixture(scope="module")
def rs() -> RuleSet:
    return load_ruleset()


def healthy(seed: int, steps: int = 300) -> dict[int, Row]:
    """A noisy GRPO run that learns: reward 0.15 -> 0.75, lengths shrinking, validation every 10 steps."""
    rng = random.Random(seed)
    rows: dict[int, Row] = {}
    for s in range(1, steps + 1):
        p = 0.15 + 0.6 / (1 + math.exp(-(s - 120) / 30))
        row = {
            "train:reward": p + rng.gauss(0, 0.04),
            "train:loss": rng.gauss(0, 0.05),
            "train:grad_norm": 0.4 * math.exp(rng.gauss(0, 0.35)),
            "train:token_mult_prob_error": 1.0
            + abs(rng.gauss(0, 0.01))
            + (3.0 if rng.random() < 0.01 else 0),
            "train:gen_kl_error": abs(rng.gauss(0.002, 0.002)),
            "train:mean_gen_tokens": 400 - 150 * s / steps + rng.gauss(0, 20),
            "train:truncated_fraction": min(1.0, max(0.0, 0.06 + rng.gauss(0, 0.03))),
            "train:zero_std_fraction": min(1.0, max(0.0, 0.1 + 0.4 * s / steps + rng.gauss(0, 0.05))),
        }
        if s % 10 == 0:
            row["val:accuracy"] = sum(rng.random() < p for _ in range(500)) / 500
        rows[s] = row
    return rows


def recorded_toy_run() -> dict[int, Row]:
    """Our trainer's own metrics.jsonl from a healthy toy run, under Shepherd's names."""
    rows: dict[int, Row] = {}
    for line in (STREAMS / "toy-reverse-healthy.jsonl").read_text().splitlines():
        d = json.loads(line)
        step = int(d.pop("step"))
        rows[step] = {canonical("metrics.jsonl", k): float(v) for k, v in d.items() if k != "time"}
    return rows


def run(rs: RuleSet, rows: dict[int, Row]) -> list[Match]:
    st = MatcherState(run_id="r1", attempt=1)
    out: list[Match] = []
    for step in sorted(rows):
        for tag, value in rows[step].items():
            out += feed(rs, st, MetricEvent("r1", 1, tag, step, value, at=step * 10.0))
    return out


def fired(ms: list[Match]) -> list[str]:
    return [m.rule for m in ms if m.rule in HEALTH]


def inject(
    rows: dict[int, Row], tag: str, value: Callable[[int, float], float], steps: range
) -> dict[int, Row]:
    out = {s: dict(r) for s, r in rows.items()}
    for s in steps:
        if tag in out[s]:
            out[s][tag] = value(s, out[s][tag])
    return out


@pytest.mark.parametrize("seed", range(6))
def test_noisy_healthy_runs_stay_quiet(rs: RuleSet, seed: int) -> None:
    assert fired(run(rs, healthy(seed))) == []


def test_the_recorded_toy_run_of_our_trainer_stays_quiet(rs: RuleSet) -> None:
    rows = recorded_toy_run()
    assert len(rows) == 101 and rows[100]["train:reward"] > 0.9  # it learned, and was fed whole
    assert fired(run(rs, rows)) == []


CASES: dict[str, tuple[str, Callable[[int, float], float], range, int]] = {
    # rule: (tag, injected value, steps, the step the rule should say it began at)
    "nan-loss": ("train:loss", lambda s, v: math.nan, range(K, 301), K),
    "reward-collapse": ("train:reward", lambda s, v: 0.02, range(K, 301), K + 2),
    "policy-mismatch": ("train:token_mult_prob_error", lambda s, v: 2.0 + v, range(K, 301), K),
    "grad-norm-spike": ("train:grad_norm", lambda s, v: 40 * v, range(K, K + 1), K),
    "response-length-collapse": ("train:mean_gen_tokens", lambda s, v: 3.0, range(K, 301), K + 4),
    "response-length-pinned": ("train:truncated_fraction", lambda s, v: 0.99, range(K, 301), K + 3),
    "no-learning-signal": ("train:zero_std_fraction", lambda s, v: 1.0, range(K, 301), K + 19),
    "validation-regression": ("val:accuracy", lambda s, v: v - 0.25, range(K, 301), K),
}


@pytest.mark.parametrize("rule", sorted(CASES))
def test_each_health_rule_fires_on_its_failure_and_names_where_it_began(rs: RuleSet, rule: str) -> None:
    tag, value, steps, began = CASES[rule]
    ms = [m for m in run(rs, inject(healthy(3), tag, value, steps)) if m.rule in HEALTH]
    assert [m.rule for m in ms][:1] == [rule]
    m = ms[0]
    assert m.evidence.metric == tag and m.evidence.step is not None
    assert abs(m.evidence.step - began) <= 2, (m.evidence.step, m.reason)
    assert m.evidence.lines and tag in m.evidence.lines[-1]  # the history goes with the alert


def test_a_gen_kl_error_blow_up_is_a_policy_mismatch_too(rs: RuleSet) -> None:
    rows = inject(healthy(4), "train:gen_kl_error", lambda s, v: 0.5, range(K, 301))
    assert fired(run(rs, rows))[:1] == ["policy-mismatch"]


def test_one_nan_grad_norm_is_a_skipped_fp16_step_but_two_in_a_row_diverged(rs: RuleSet) -> None:
    once = inject(healthy(5), "train:grad_norm", lambda s, v: math.inf, range(K, K + 1))
    assert fired(run(rs, once)) == []
    twice = inject(healthy(5), "train:grad_norm", lambda s, v: math.nan, range(K, K + 2))
    (m,) = [m for m in run(rs, twice) if m.rule == "nan-loss"]
    assert m.evidence.step == K and m.action_names == ("resume", "alert")


def test_the_nan_rule_rolls_back_to_the_best_before_the_divergence_and_a_repeat_gives_up(rs: RuleSet) -> None:
    cr = rs.by_name["nan-loss"]
    (resume,) = [a.resume for a in cr.rule.actions if a.resume is not None]
    assert resume.from_ == "best" and resume.before_divergence
    assert cr.rule.same_signature_limit == 2 and cr.rule.deterministic


def test_health_rules_only_alert_and_never_outrank_a_rule_that_acts(rs: RuleSet) -> None:
    acting = [cr for cr in rs.rules if any(a.kind != "alert" for a in cr.rule.actions)]
    for name in HEALTH - {"nan-loss"}:
        cr = rs.by_name[name]
        assert [a.kind for a in cr.rule.actions] == ["alert"] and cr.rule.category == "info", name
        outranked = [a.name for a in acting if a.priority <= cr.priority and a.name != "run-completed"]
        assert outranked == [], (name, outranked)
