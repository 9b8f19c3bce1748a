"""The resume policy: progress-aware budgets, free time limits, same-signature and thrash stops, backoff."""

from __future__ import annotations

from dataclasses import replace

from supervisor.decide.policy import AttemptRecord, PolicyConfig, consecutive_failures, decide

HOUR = 3600.0


def fail(
    n: int,
    *,
    start: float,
    runtime: float = 120.0,
    ckpt: tuple[int | None, int | None] = (None, None),
    sig: str = "nccl-error:x",
    rule: str = "nccl-error",
    category: str = "failure",
    **kw: object,
) -> AttemptRecord:
    return AttemptRecord(
        attempt=n,
        category=category,
        started_at=start,
        ended_at=start + runtime,
        rule=rule,
        signature=sig,
        checkpoint_before=ckpt[0],
        checkpoint_after=ckpt[1],
        **kw,  # type: ignore[arg-type]
    )


def test_budget_of_three_without_progress_stops_the_fourth_resume() -> None:
    hist: list[AttemptRecord] = []
    t = 0.0
    decisions = []
    for i in range(1, 5):
        hist.append(fail(i, start=t, sig=f"nccl-error:{i}"))  # different signatures: only the budget applies
        d = decide(hist, now=t + 120)
        decisions.append(d)
        t += HOUR
    assert [d.action for d in decisions] == ["resume", "resume", "resume", "give_up"]
    assert decisions[0].reason.endswith("budget 2/3 left")
    assert decisions[3].alert and "budget spent" in decisions[3].reason


def test_budget_of_two_stops_the_third_resume() -> None:
    cfg = PolicyConfig(max_retries=2)
    hist = [fail(i, start=i * HOUR, sig=f"s{i}") for i in range(1, 4)]
    assert decide(hist[:2], now=2 * HOUR + 200, cfg=cfg).action == "resume"
    assert decide(hist, now=3 * HOUR + 200, cfg=cfg).action == "give_up"


def test_progress_resets_the_budget() -> None:
    hist = [
        fail(1, start=0, sig="a"),
        fail(2, start=HOUR, sig="b"),
        fail(3, start=2 * HOUR, runtime=1800, ckpt=(None, 40), sig="c"),  # wrote step_40 before failing
        fail(4, start=3 * HOUR, ckpt=(40, 40), sig="d"),
    ]
    assert consecutive_failures(hist, PolicyConfig()) == 2
    d = decide(hist, now=3 * HOUR + 200)
    assert d.action == "resume" and d.budget_left == 1


def test_step_progress_counts_when_configured() -> None:
    rec = [
        fail(1, start=0, sig="a"),
        fail(2, start=HOUR, step_before=10, step_after=25, sig="b"),  # type: ignore[arg-type]
        fail(3, start=2 * HOUR, sig="c"),
    ]
    assert consecutive_failures(rec, PolicyConfig()) == 3
    # the attempt that advanced 15 steps resets the count: it and the one after it remain
    assert consecutive_failures(rec, PolicyConfig(progress_steps=10)) == 2
    assert consecutive_failures(rec, PolicyConfig(progress_steps=20)) == 3


def test_deterministic_signature_gets_one_retry_and_rules_can_override() -> None:
    one = [fail(1, start=0, rule="cuda-oom", sig="cuda-oom:x", deterministic=True)]
    assert decide(one, now=200).action == "resume"
    two = [*one, fail(2, start=HOUR, rule="cuda-oom", sig="cuda-oom:y", deterministic=True)]
    assert decide(two, now=HOUR + 200).action == "give_up"
    generous = [
        *one,
        fail(2, start=HOUR, rule="cuda-oom", sig="cuda-oom:y", deterministic=True, max_retries=5),
    ]
    assert decide(generous, now=HOUR + 200).action == "resume"


def test_time_limits_and_preemptions_are_free_with_checkpoints() -> None:
    hist = []
    for i in range(1, 12):
        cat = "time_limit" if i % 2 else "preemption"
        hist.append(fail(i, start=i * HOUR, runtime=3000, ckpt=(i * 10, i * 10 + 10), category=cat, sig=None))  # type: ignore[arg-type]
        d = decide(hist, now=i * HOUR + 3000)
        assert d.action == "resume" and d.at == i * HOUR + 3000 and "budget untouched" in d.reason


def test_time_limit_without_any_checkpoint_consumes_the_budget() -> None:
    hist = [fail(i, start=i * HOUR, runtime=3000, category="time_limit", sig=None) for i in range(1, 5)]  # type: ignore[arg-type]
    assert [decide(hist[:k], now=k * HOUR + 3000).action for k in range(1, 5)] == [
        "resume",
        "resume",
        "resume",
        "give_up",
    ]
    assert "never wrote a checkpoint" in decide(hist[:1], now=HOUR + 3000).reason


def test_same_signature_in_a_row_stops_within_the_budget_when_an_attempt_made_no_progress() -> None:
    hist = [fail(i, start=i * HOUR, runtime=1800, ckpt=(i, i + 1), sig="nccl-error:N") for i in range(1, 4)]
    hist.append(fail(4, start=4 * HOUR, runtime=1800, ckpt=(4, 4), sig="nccl-error:N"))  # no new checkpoint
    assert decide(hist[:3], now=3 * HOUR + 1800).action == "resume"
    d = decide(hist, now=4 * HOUR + 1800)
    assert d.action == "give_up" and "4 times in a row" in d.reason
    assert d.consecutive_failures == 2  # the budget alone would have resumed


def test_the_same_failure_after_progress_every_time_resumes_and_says_so() -> None:
    """A GPU fault on another node each time, the run advancing between them: stopping would idle the
    allocation until a person answers, for nothing a person could fix sooner."""
    hist = [fail(i, start=i * HOUR, runtime=1800, ckpt=(i, i + 1), sig="gpu-xid:N") for i in range(1, 6)]
    d = decide(hist, now=5 * HOUR + 1800)
    assert d.action == "resume"
    assert "the same failure 5 times in a row, each after progress: resuming, worth a look" in d.reason


def test_thrashing_stops_whatever_the_budget() -> None:
    cfg = PolicyConfig(max_retries=100)
    quick = [fail(i, start=i * 100.0, runtime=10, ckpt=(i, i + 1), sig=f"s{i}") for i in range(5)]
    d = decide(quick, now=5 * 100.0, cfg=cfg)
    assert d.action == "give_up" and "thrashing: 5 failures in 10 min" in d.reason
    hourly = [fail(i, start=i * 300.0, runtime=10, ckpt=(i, i + 1), sig=f"s{i}") for i in range(11)]
    d2 = decide(hourly, now=11 * 300.0, cfg=cfg)
    assert d2.action == "give_up" and "in 60 min" in d2.reason
    assert decide(hourly[:10], now=10 * 300.0, cfg=cfg).action == "resume"


def test_backoff_doubles_caps_and_resets_after_healthy_running() -> None:
    cfg = PolicyConfig(max_retries=100, same_signature_limit=100, thrash_max=100, thrash_long_max=100)
    hist = []
    delays = []
    for i in range(8):
        hist.append(fail(i, start=i * HOUR, runtime=30, sig="s"))
        delays.append(decide(hist, now=i * HOUR + 30, cfg=cfg).backoff_s)
    assert delays == [60, 120, 240, 480, 960, 1800, 1800, 1800]
    d = decide(hist[:2], now=HOUR + 30, cfg=cfg)
    assert d.at == HOUR + 30 + 120 and "backing off 120 s after 2 consecutive failures" in d.reason
    healthy = [*hist, fail(9, start=9 * HOUR, runtime=900, sig="s")]
    d = decide(healthy, now=9 * HOUR + 900, cfg=cfg)
    assert d.backoff_s == 0 and "resubmitting at once after 1 failure" in d.reason  # no crash loop
    again = [*healthy, fail(10, start=9 * HOUR + 1000, runtime=30, sig="s")]
    assert decide(again, now=9 * HOUR + 1030, cfg=cfg).backoff_s == 120  # the healthy one counts as 1


def test_non_retryable_gives_up_and_completed_completes() -> None:
    assert decide([fail(1, start=0, retryable=False)], now=200).action == "give_up"
    done = AttemptRecord(attempt=1, category="completed", started_at=0, ended_at=100)
    assert decide([done], now=100).action == "complete"
    assert decide([], now=0).action == "none"


def test_a_rules_own_same_signature_limit_gives_up_on_the_repeat_even_after_progress() -> None:
    """A NaN rollback: the rolled-back attempt wrote new checkpoints, then diverged the same way again."""
    nan = dict(rule="nan-loss", signature="nan-loss:metric:nan", deterministic=True, max_retries=1)
    history = [
        AttemptRecord(1, "failure", 0, 100, checkpoint_before=None, checkpoint_after=20, **nan),  # type: ignore[arg-type]
        AttemptRecord(2, "failure", 200, 300, checkpoint_before=20, checkpoint_after=24, **nan),  # type: ignore[arg-type]
    ]
    assert decide(history, 400).action == "resume"  # progress reset the budget; the default limit is 4
    limited = [replace(a, same_signature_limit=2) for a in history]
    d = decide(limited, 400)
    assert d.action == "give_up" and "the same failure (nan-loss:metric:nan) 2 times in a row" in d.reason


def test_a_persons_resume_starts_the_budget_and_the_streak_afresh() -> None:
    """The policy stopped and a person resumed: their next failure is the first of a fresh count, not the
    fifth of the old one (which would stop the run again at once, whatever the failure)."""
    hist = [fail(i, start=i * HOUR, sig="gpu-xid:N") for i in range(1, 5)]
    stopped = decide(hist, now=5 * HOUR)
    assert stopped.action == "give_up"
    hist.append(fail(5, start=6 * HOUR, sig="gpu-xid:N", resumed_by_human=True))
    d = decide(hist, now=7 * HOUR)
    assert d.action == "resume" and d.reason.endswith("budget 2/3 left"), d
    assert d.backoff_s == 60.0  # the first failure of the new count: the base backoff
    hist += [fail(i, start=i * HOUR, sig="gpu-xid:N") for i in range(6, 9)]
    again = decide(hist, now=9 * HOUR)
    assert again.action == "give_up" and "budget spent: 4 failures" in again.reason


def test_faults_pinned_to_a_node_the_resume_excludes_have_their_own_budget_not_the_rules() -> None:
    """GPU faults on a different node each time, before any new checkpoint: at 16k GPUs the cluster's
    failure rate, not a loop; the rule's 3 retries and the same-signature stop would have idled the run."""
    hist: list[AttemptRecord] = []
    decisions = []
    for i in range(1, 10):
        hist.append(fail(i, start=i * HOUR, sig="cuda-hardware-error:xid", rule="cuda-hardware-error",
                         fault_node=f"node{i:04d}"))  # fmt: skip
        decisions.append(decide(hist, now=i * HOUR + 120))
    assert [d.action for d in decisions] == ["resume"] * 8 + ["give_up"]
    assert decisions[4].reason == (
        "cuda-hardware-error on node0005, which the next attempt excludes: backing off 960 s after 5 "
        "consecutive failures; node faults without progress 5/8"
    )
    assert "9 node faults in a row without progress" in decisions[8].reason
    assert "the cluster looks unwell" in decisions[8].reason


def test_a_failure_no_node_explains_keeps_its_own_count_beside_node_faults() -> None:
    hist = [fail(i, start=i * HOUR, sig="gpu", fault_node=f"n{i}") for i in range(1, 4)]
    hist += [fail(4, start=4 * HOUR, sig="nccl-error:x")]
    d = decide(hist, now=4 * HOUR + 120)
    assert d.action == "resume" and d.reason.endswith("budget 2/3 left")  # 1 failure of its kind, not 4
    hist += [fail(i, start=i * HOUR, sig="nccl-error:x") for i in range(5, 8)]
    stop = decide(hist, now=7 * HOUR + 120)
    assert stop.action == "give_up" and "budget spent: 4 failures" in stop.reason
