"""What the policy is told about past attempts: the decision that steered each one, never a later alert."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from supervisor.decide.history import attempt_records, policy_config
from supervisor.decide.policy import decide
from supervisor.domain.runs import AttemptRow, AttemptState, DecisionRow
from supervisor.domain.spec import JobSpec

NAN_POLICY = {
    "category": "failure",
    "retryable": True,
    "deterministic": True,
    "max_retries": 1,
    "same_signature_limit": 2,
}


def attempt(n: int, ckpt_at_submit: int | None) -> AttemptRow:
    start = n * 100.0
    return AttemptRow(
        "r", n, f"t{n}", AttemptState.ENDED, str(n), start, start, start, start + 50, "COMPLETED", "", 0,
        "node1", None, json.dumps({"ckpt_step_at_submit": ckpt_at_submit}), None, start + 50,
    )  # fmt: skip


def decision(i: int, n: int, rule: str, action: str, outcome: str, **policy: Any) -> DecisionRow:
    signature = f"followup:{rule}" if action == "none" else f"{rule}:metric:nan"
    evidence = {"policy": policy}
    return DecisionRow(i, "r", n, n * 100.0 + 50, rule, action, signature, "", evidence, outcome)


def test_a_completion_noticed_after_the_rollback_does_not_hide_the_divergence() -> None:
    """The job ends COMPLETED just after the NaN rollback was decided: the completion's decision is ignored,
    a metric rule's follow-up is folded into the incident; the second divergence still gives up."""
    attempts = [attempt(1, None), attempt(2, 10)]
    decisions = [
        decision(1, 1, "nan-loss", "resume,alert", "resuming from step_10", ckpt_after=30, **NAN_POLICY),
        decision(2, 1, "reward-nan", "none", "", category="failure", ckpt_after=30),
        decision(3, 1, "run-completed", "alert", "ignored: a newer attempt exists", category="completed"),
        decision(4, 2, "nan-loss", "resume,alert", "", ckpt_after=30, **NAN_POLICY),
    ]
    history = attempt_records(attempts, decisions[:3], now=300.0)
    assert [(r.attempt, r.rule, r.category) for r in history] == [(1, "nan-loss", "failure")]
    history = attempt_records(attempts, decisions, now=300.0)
    d = decide(history, now=300.0)
    assert d.action == "give_up" and "2 times in a row" in d.reason, d


def test_an_alert_after_the_steering_decision_does_not_replace_it() -> None:
    attempts = [attempt(1, None)]
    decisions = [
        decision(1, 1, "nan-loss", "resume,alert", "resuming", ckpt_after=30, **NAN_POLICY),
        decision(2, 1, "oom-alert", "alert", "alerted", category="failure"),
    ]
    (record,) = attempt_records(attempts, decisions, now=200.0)
    assert record.rule == "nan-loss" and record.same_signature_limit == 2


def test_an_attempt_a_person_resumed_is_marked_so_the_policy_counts_afresh_from_it() -> None:
    runs = [attempt(n, None) for n in range(1, 6)]
    runs[4] = replace(runs[4], overrides_json=json.dumps(runs[4].overrides | {"resumed_by": "slack:U123"}))
    decisions = [
        decision(n, n, "cuda-hardware-error", "resume", "resuming", category="failure") for n in range(1, 6)
    ]
    history = attempt_records(runs, decisions, now=600.0)
    assert [r.resumed_by_human for r in history] == [False, False, False, False, True]
    assert decide(history, now=600.0).action == "resume"
    assert decide(history[:4], now=600.0).action == "give_up"


def test_a_runs_explicit_attempt_cap_bounds_node_faults_too_the_default_does_not() -> None:
    def spec(**resume: int) -> JobSpec:
        return JobSpec.model_validate({"name": "r", "command": ["true"], "resume": resume})

    assert policy_config(spec()).node_fault_max_retries == 8
    assert policy_config(spec(max_attempts=2)).node_fault_max_retries == 1
    assert policy_config(spec(max_attempts=20)).node_fault_max_retries == 8
