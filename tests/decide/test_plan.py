"""What a rule match does, as data: the effects decide/plan.py returns for each kind of rule and history.

Pure: rules are built in memory, the history is a list of records, nothing touches Slurm, files or SQLite.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from supervisor.decide.plan import (
    Alert,
    Cancel,
    Complete,
    GiveUp,
    Hold,
    Resume,
    plan_match,
    unrecognised_resume,
)
from supervisor.decide.policy import AttemptRecord, PolicyConfig
from supervisor.domain.jobstate import JobState
from supervisor.rules.engine import Evidence, Match
from supervisor.rules.model import Action

NOW = 10_000.0


def match(*actions: dict[str, Any], category: str = "failure", rule: str = "nccl-error") -> Match:
    return Match(
        rule=rule,
        run_id="run-1",
        attempt=2,
        priority=50,
        category=category,
        actions=tuple(Action.model_validate(a) for a in actions),
        evidence=Evidence(source="ray-driver.log", first_line=7, lines=("NCCL error",), match_line=7),
        signature=f"{rule}:x",
        reason=f"{rule}: something broke",
    )


def failures(n: int, *, category: str = "failure", wrote_checkpoint: bool = False) -> list[AttemptRecord]:
    """`n` attempts that each failed the same way an hour apart, the last one ending at NOW - 10."""
    out = []
    for i in range(1, n + 1):
        end = NOW - 10 - (n - i) * 3600
        out.append(
            AttemptRecord(
                attempt=i,
                category=category,
                started_at=end - 600,
                ended_at=end,
                rule="nccl-error",
                signature=f"nccl-error:{i}",
                checkpoint_before=(i - 1) * 10 if wrote_checkpoint else None,
                checkpoint_after=i * 10 if wrote_checkpoint else None,
            )
        )
    return out


def plan(m: Match, history: Sequence[AttemptRecord], **kw: Any) -> tuple[Any, ...]:
    context = {"run": m.run_id, "rule": m.rule, "reason": m.reason, "excerpt": "NCCL error"} | kw.pop(
        "context", {}
    )
    return plan_match(m, history, PolicyConfig(), now=NOW, context=context, **kw).effects


def test_a_retryable_failure_within_budget_resumes_after_the_backoff_with_the_rules_fix() -> None:
    m = match(
        {"resume": {"from": "latest", "env": {"NCCL_IB_DISABLE": "1"}, "exclude_node": True}},
        {"alert": {"level": "warning", "message": "{run}: {rule}"}},
    )
    (effect,) = plan(m, failures(1))
    assert isinstance(effect, Resume)
    assert effect.selector == "latest" and effect.env == {"NCCL_IB_DISABLE": "1"} and effect.exclude_node
    assert effect.at == NOW  # one failure after 10 min of healthy running: resubmitted at once
    assert "budget 2/3 left" in effect.why


def test_the_resume_is_said_by_the_resume_itself_so_no_separate_alert_is_planned() -> None:
    m = match({"resume": {}}, {"alert": {"level": "error", "message": "{run} failed"}})
    result = plan_match(m, failures(1), PolicyConfig(), now=NOW, context={"run": "run-1"})
    assert [type(e) for e in result.effects] == [Resume]
    assert result.alert_text == "run-1 failed"


def test_from_latest_means_the_specs_own_checkpoint_choice_and_best_stays_best() -> None:
    (latest,) = plan(match({"resume": {"from": "latest"}}), failures(1), default_checkpoint="best")
    (best,) = plan(match({"resume": {"from": "best"}}), failures(1), default_checkpoint="latest")
    assert isinstance(latest, Resume) and latest.selector == "best"
    assert isinstance(best, Resume) and best.selector == "best"


def test_a_spent_budget_turns_the_resume_into_a_give_up_with_the_policys_reason() -> None:
    (effect,) = plan(match({"resume": {}}, {"alert": {"level": "error"}}), failures(4))
    assert isinstance(effect, GiveUp) and "retry budget spent" in effect.reason


def test_a_fix_that_needs_something_the_spec_lacks_gives_up_and_says_what() -> None:
    m = match({"resume": {"env": {"HF_HOME": "{spec.shared_cache_dir}/hf"}}}, rule="hf-cache-not-shared")
    (effect,) = plan(m, failures(1))
    assert isinstance(effect, GiveUp)
    assert "hf-cache-not-shared needs HF_HOME" in effect.reason and "shared_cache_dir" in effect.reason
    (fixed,) = plan(m, failures(1), context={"spec.shared_cache_dir": "/shared"})
    assert isinstance(fixed, Resume) and fixed.env == {"HF_HOME": "/shared/hf"}


def test_a_time_limit_after_a_new_checkpoint_continues_the_chain_at_once() -> None:
    (effect,) = plan(
        match({"resume": {}}, category="time_limit"),
        failures(3, category="time_limit", wrote_checkpoint=True),
    )
    assert isinstance(effect, Resume) and effect.at == NOW and "budget untouched" in effect.why


def test_give_up_cancel_and_hold_are_planned_as_the_rule_lists_them() -> None:
    effects = plan(match({"cancel": {}}, {"hold": {}}, {"give_up": {"reason": "deterministic data bug"}}), [])
    assert effects == (Cancel(), Hold(), GiveUp("deterministic data bug"))
    (default,) = plan(match({"give_up": {}}), [])
    assert default == GiveUp("nccl-error: something broke")


def test_an_alert_only_rule_alerts_at_its_level_and_a_hold_does_not_silence_it() -> None:
    assert plan(match({"alert": {"level": "error", "message": "x"}}), []) == (Alert("alert", "error"),)
    assert plan(match({"hold": {}}, {"alert": {"level": "warning", "message": "x"}}), []) == (
        Hold(),
        Alert("alert", "warning"),
    )


def test_a_completed_run_is_completed_and_announced_at_info_level() -> None:
    m = match(
        {"alert": {"level": "warning", "message": "{run}: completed."}},
        category="completed",
        rule="run-completed",
    )
    assert plan(m, []) == (Alert("completed", "info"), Complete())
    assert plan(match(category="completed", rule="run-completed"), []) == (Complete(),)


def test_an_alert_whose_placeholder_has_no_value_still_alerts_with_the_rule_and_reason() -> None:
    m = match({"alert": {"level": "error", "message": "{run} on {node}"}})
    result = plan_match(m, [], PolicyConfig(), now=NOW, context={"run": "run-1"})
    assert result.effects == (Alert("alert", "error"),)
    assert result.alert_text.startswith("run-1: nccl-error: nccl-error: something broke (bad template")


def test_an_exit_0_before_the_last_step_continues_the_chain_and_costs_no_budget_after_a_checkpoint() -> None:
    m = match(
        {"alert": {"level": "info", "message": "{run}: completed."}},
        category="completed",
        rule="run-completed",
    )
    done = [
        AttemptRecord(
            attempt=2,
            category="completed",
            started_at=0,
            ended_at=NOW - 5,
            checkpoint_before=10,
            checkpoint_after=20,
        )
    ]
    result = plan_match(
        m,
        done,
        PolicyConfig(),
        now=NOW,
        context={},
        unfinished="its newest checkpoint step_20 is below grpo.max_num_steps=100",
    )
    (effect,) = result.effects
    assert isinstance(effect, Resume) and effect.at == NOW and "budget untouched" in effect.why
    assert "not finished" in result.alert_text and "step_20" in result.alert_text


def test_an_exit_0_before_the_last_step_without_a_new_checkpoint_is_a_loop_and_stops() -> None:
    m = match(category="completed", rule="run-completed")
    looped = [
        AttemptRecord(
            attempt=i,
            category="time_limit",
            started_at=i * 100.0,
            ended_at=i * 100.0 + 50,
            checkpoint_before=20,
            checkpoint_after=20,
        )
        for i in range(1, 5)
    ]
    looped.append(
        AttemptRecord(
            attempt=5,
            category="completed",
            started_at=500.0,
            ended_at=550.0,
            checkpoint_before=20,
            checkpoint_after=20,
        )
    )
    (effect,) = plan_match(m, looped, PolicyConfig(), now=600.0, context={}, unfinished="below").effects
    assert isinstance(effect, GiveUp) and "below" in effect.reason


def test_the_divergence_step_is_the_first_nan_or_inf_loss_reward_or_grad_norm() -> None:
    from supervisor.decide.plan import divergence_step

    points = [("train:loss", 3, 0.5), ("train:grad_norm", 6, float("inf")), ("train:reward", 7, float("nan"))]
    assert divergence_step(points) == 6
    assert divergence_step([("val:accuracy", 2, float("nan")), ("train:loss", 3, 0.5)]) is None


def test_a_rollback_on_a_log_line_is_planned_without_a_step_for_the_executor_to_find() -> None:
    m = match({"resume": {"from": "best", "before_divergence": True}}, rule="nan-loss")
    (effect,) = plan(m, failures(1))
    assert isinstance(effect, Resume) and effect.rollback and effect.before_step is None


def test_an_unclaimed_end_resumes_once_only_when_it_failed_after_saving_a_new_checkpoint() -> None:
    def match(state: JobState, before: int | None, after: int | None) -> object:
        return unrecognised_resume("r", 2, state, "attempt 2 ended FAILED", step_before=before,
                                   step_after=after, at=5.0)  # fmt: skip

    m = match(JobState.FAILED, 10, 20)
    assert isinstance(m, Match) and m.action_names == ("resume",) and m.max_retries == 1
    assert m.reason == (
        "attempt 2 ended FAILED; it saved step_20 first, so resuming once from the latest checkpoint "
        "(worth a rule if it recurs)"
    )
    assert match(JobState.FAILED, None, 20) is not None  # its first checkpoint
    assert match(JobState.FAILED, 20, 20) is None  # nothing new: waits for a human
    assert match(JobState.FAILED, None, None) is None
    assert match(JobState.CANCELLED, 10, 20) is None  # someone cancelled it on purpose


def test_an_unclaimed_end_after_new_steps_but_before_the_next_save_resumes_once_too() -> None:
    def match(state: JobState, trained_to: int | None) -> object:
        return unrecognised_resume("r", 2, state, "attempt 2 ended FAILED", step_before=20, step_after=20,
                                   at=5.0, trained_to=trained_to)  # fmt: skip

    m = match(JobState.FAILED, 27)
    assert isinstance(m, Match) and m.action_names == ("resume",) and m.max_retries == 1
    assert m.same_signature_limit == 2  # and not again at the next unrecognised end
    assert m.reason == (
        "attempt 2 ended FAILED; it trained from step 20 to step 27 first (no newer checkpoint yet), "
        "so resuming once from the latest checkpoint (worth a rule if it recurs)"
    )
    assert match(JobState.FAILED, 20) is None  # it crashed before its first new step: start-up, loading
    assert match(JobState.FAILED, None) is None  # no step seen
    assert match(JobState.CANCELLED, 27) is None
