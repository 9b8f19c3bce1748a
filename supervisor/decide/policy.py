"""The resume policy: pure functions over a run's attempt history.

What the best supervisors get wrong, and what this does instead:

* budgets count consecutive failures *without progress* (a newer complete
  checkpoint, or a configured number of steps, resets them) so a long run that
  keeps advancing is never abandoned, and one that loops is stopped early;
* deterministic signatures (OOM without a config change, a bad path) get one
  retry, others three; both per rule;
* time limits and preemptions are the chain working and cost nothing, unless
  the attempt never wrote a checkpoint (then it is a loop in disguise);
* the same signature N times in a row stops, whatever the budget says, unless every one of those attempts
  made progress: at scale the same hardware fault recurs on other nodes while the run advances, and stopping
  then idles every GPU until a person answers, so the run resumes and the reason says it (a rule may set its
  own N, which always stops: a NaN rollback gives up on the second divergence even when the rolled-back
  attempt wrote checkpoints first);
* thrashing (> 4 failures in 10 min, > 10 in an hour) stops;
* a fault pinned to a node that the resume excludes (a GPU that fell off the bus, a dead node) is not a loop:
  the next attempt runs without that node, so the same fault again is the cluster's failure rate (at 16k GPUs
  one every few hours), not the run's. Such faults count towards their own, larger budget (8 in a row
  without progress: the cluster looks unwell) instead of the rule's, and no same-signature streak stops them;
* a person's resume starts the count afresh: budgets, streaks, thrashing and backoff look back no further
  than the attempt a human started, or a run stopped for a human would stop again at its very next failure;
* backoff doubles from 60 s to 30 min and resets after 10 min of healthy running; a failure after such a
  healthy stretch resubmits at once (no crash loop to space out: Kubernetes, SkyPilot and torchrun restart
  at once too).

Every decision carries a human reason for ``shepherd status``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

FREE_CATEGORIES = frozenset({"time_limit", "preemption"})
FAILURE_CATEGORIES = frozenset({"failure", "node_failure", "stall"})


@dataclass(frozen=True, slots=True)
class AttemptRecord:
    """One attempt as the policy sees it: how it ended (the deciding rule's category) and what it achieved."""

    attempt: int
    category: str  # a rule category: failure, node_failure, stall, time_limit, preemption, completed, ...
    started_at: float | None = None  # when it started RUNNING; None: it never ran
    ended_at: float | None = None
    rule: str | None = None
    signature: str | None = None
    retryable: bool = True
    deterministic: bool = False
    max_retries: int | None = None  # the rule's own budget; None: the policy default
    same_signature_limit: int | None = (
        None  # the rule's own "give up on the Nth in a row"; None: the policy's
    )
    checkpoint_before: int | None = None  # newest complete checkpoint step when the attempt started
    checkpoint_after: int | None = None  # ... and when it ended
    step_before: int | None = None
    step_after: int | None = None
    resumed_by_human: bool = False  # a person started this attempt (`shepherd resume`, Slack's /resume)
    fault_node: str | None = None  # the node the failure was pinned on, excluded from the next attempts

    @property
    def runtime(self) -> float:
        if self.started_at is None or self.ended_at is None:
            return 0.0
        return max(0.0, self.ended_at - self.started_at)

    @property
    def wrote_checkpoint(self) -> bool:
        if self.checkpoint_after is None:
            return False
        return self.checkpoint_before is None or self.checkpoint_after > self.checkpoint_before


@dataclass(frozen=True, slots=True)
class PolicyConfig:
    max_retries: int = 3
    deterministic_max_retries: int = 1
    progress_steps: int | None = None  # steps that count as progress even without a new checkpoint
    same_signature_limit: int = 4
    node_fault_max_retries: int = 8  # node-pinned faults (node excluded) in a row without progress
    thrash_window_s: float = 600.0
    thrash_max: int = 4  # more than this many failures in thrash_window_s stops
    thrash_long_window_s: float = 3600.0
    thrash_long_max: int = 10
    backoff_base_s: float = 60.0
    backoff_cap_s: float = 1800.0
    healthy_s: float = 600.0


@dataclass(frozen=True, slots=True)
class Decision:
    action: Literal["resume", "give_up", "complete", "none"]
    at: float  # when to act (resume time after backoff)
    reason: str
    alert: bool = False
    budget_left: int | None = None
    budget_total: int | None = None
    backoff_s: float = 0.0
    consecutive_failures: int = 0


def made_progress(a: AttemptRecord, cfg: PolicyConfig) -> bool:
    if a.wrote_checkpoint:
        return True
    if cfg.progress_steps is not None and a.step_before is not None and a.step_after is not None:
        return a.step_after - a.step_before >= cfg.progress_steps
    return False


def counts_as_failure(a: AttemptRecord) -> bool:
    """Time limits and preemptions are free, unless the attempt never wrote a checkpoint."""
    if a.category in FREE_CATEGORIES:
        return not a.wrote_checkpoint
    return a.category in FAILURE_CATEGORIES


def consecutive_failures(
    history: Sequence[AttemptRecord], cfg: PolicyConfig, *, node_faults: bool = False
) -> int:
    """Failures since the last attempt that made progress (a failing attempt that progressed counts as 1):
    those pinned to an excluded node with `node_faults`, the others without."""
    n = 0
    for a in reversed(history):
        if counts_as_failure(a) and (a.fault_node is not None) == node_faults:
            n += 1
        if made_progress(a, cfg):
            break
    return n


def budget_for(a: AttemptRecord, cfg: PolicyConfig) -> int:
    if a.max_retries is not None:
        return a.max_retries
    return cfg.deterministic_max_retries if a.deterministic else cfg.max_retries


def same_signature_streak(history: Sequence[AttemptRecord]) -> int:
    """How many failures in a row (free attempts skipped) share the last failure's signature."""
    fails = [a for a in history if counts_as_failure(a)]
    if not fails or fails[-1].signature is None:
        return 0
    sig = fails[-1].signature
    n = 0
    for a in reversed(fails):
        if a.signature != sig:
            break
        n += 1
    return n


def backoff_s(history: Sequence[AttemptRecord], cfg: PolicyConfig) -> tuple[float, int]:
    """(delay, failures counted): doubling per failure in a row, reset by a healthy stretch of running."""
    n = 0
    for a in reversed(history):
        if not counts_as_failure(a):
            if a.category in FREE_CATEGORIES:
                continue
            break
        n += 1
        if a.runtime >= cfg.healthy_s:
            break
    if n == 0:
        return 0.0, 0
    if n == 1 and history[-1].runtime >= cfg.healthy_s:
        return 0.0, 1  # a failure after a healthy stretch is no crash loop: nothing to space out
    return min(cfg.backoff_cap_s, cfg.backoff_base_s * 2 ** (n - 1)), n


def waiting(delay: float, n: int) -> str:
    """The backoff in words for a decision's reason."""
    noun = "failure" if n == 1 else "consecutive failures"
    if delay <= 0:
        return f"resubmitting at once after {n} {noun}"
    return f"backing off {delay:.0f} s after {n} {noun}"


def _thrashing(history: Sequence[AttemptRecord], now: float, cfg: PolicyConfig) -> str | None:
    ends = [a.ended_at for a in history if counts_as_failure(a) and a.ended_at is not None]
    short = sum(1 for t in ends if now - t <= cfg.thrash_window_s)
    if short > cfg.thrash_max:
        return f"thrashing: {short} failures in {cfg.thrash_window_s / 60:.0f} min"
    long = sum(1 for t in ends if now - t <= cfg.thrash_long_window_s)
    if long > cfg.thrash_long_max:
        return f"thrashing: {long} failures in {cfg.thrash_long_window_s / 60:.0f} min"
    return None


def since_a_human_resumed(history: Sequence[AttemptRecord]) -> Sequence[AttemptRecord]:
    """The attempts from the last one a person started on: what came before it, that person has judged."""
    for i in range(len(history) - 1, -1, -1):
        if history[i].resumed_by_human:
            return history[i:]
    return history


def decide(history: Sequence[AttemptRecord], now: float, cfg: PolicyConfig | None = None) -> Decision:
    """What to do after the last attempt in `history` ended."""
    cfg = cfg or PolicyConfig()
    if not history:
        return Decision("none", now, "no attempt yet")
    history = since_a_human_resumed(history)
    last = history[-1]
    what = last.rule or last.category
    if last.category == "completed":
        return Decision("complete", now, "completed")
    if not last.retryable:
        return Decision("give_up", now, f"{what} is not retryable: giving up", alert=True)
    if not counts_as_failure(last):
        if last.category in FREE_CATEGORIES:
            kind = "time limit" if last.category == "time_limit" else "preemption"
            return Decision(
                "resume", now, f"{kind} after a new checkpoint: continuing the chain (budget untouched)"
            )
        return Decision("none", now, f"{what}: nothing to resume")
    thrash = _thrashing(history, now, cfg)
    if thrash:
        return Decision("give_up", now, f"{thrash}: stopped resuming", alert=True)
    if last.fault_node is not None:
        return _node_fault(history, now, cfg, what, last.fault_node)
    c = consecutive_failures(history, cfg)
    limit = budget_for(last, cfg)
    if c > limit:
        return Decision(
            "give_up",
            now,
            f"retry budget spent: {c} failures without progress, {what} allows {limit} "
            f"{'retry' if limit == 1 else 'retries'}",
            alert=True,
            budget_left=0,
            budget_total=limit,
            consecutive_failures=c,
        )
    streak = same_signature_streak(history)
    note = ""
    if streak >= (last.same_signature_limit or cfg.same_signature_limit):
        streaked = [a for a in history if counts_as_failure(a)][-streak:]
        if last.same_signature_limit is None and all(made_progress(a, cfg) for a in streaked):
            note = f"; the same failure {streak} times in a row, each after progress: resuming, worth a look"
    if streak >= (last.same_signature_limit or cfg.same_signature_limit) and not note:
        return Decision(
            "give_up",
            now,
            f"the same failure ({last.signature}) {streak} times in a row: stopped resuming",
            alert=True,
            budget_left=limit - c,
            budget_total=limit,
            consecutive_failures=c,
        )
    delay, n = backoff_s(history, cfg)
    at = max(now, (last.ended_at if last.ended_at is not None else now) + delay)
    left = limit - c
    why = "never wrote a checkpoint" if last.category in FREE_CATEGORIES else what
    return Decision(
        "resume",
        at,
        f"{why}: {waiting(delay, n)}; budget {left}/{limit} left{note}",
        budget_left=left,
        budget_total=limit,
        backoff_s=delay,
        consecutive_failures=c,
    )


def _node_fault(
    history: Sequence[AttemptRecord], now: float, cfg: PolicyConfig, what: str, node: str
) -> Decision:
    """A fault pinned to `node`, which the resume excludes: its own budget, no same-signature streak."""
    c = consecutive_failures(history, cfg, node_faults=True)
    limit = cfg.node_fault_max_retries
    if c > limit:
        return Decision(
            "give_up",
            now,
            f"{c} node faults in a row without progress, each node excluded ({what} on {node} last): "
            "the cluster looks unwell, stopped resuming",
            alert=True,
            budget_left=0,
            budget_total=limit,
            consecutive_failures=c,
        )
    delay, n = backoff_s(history, cfg)
    last = history[-1]
    at = max(now, (last.ended_at if last.ended_at is not None else now) + delay)
    return Decision(
        "resume",
        at,
        f"{what} on {node}, which the next attempt excludes: {waiting(delay, n)}; "
        f"node faults without progress {c}/{limit}",
        budget_left=limit - c,
        budget_total=limit,
        backoff_s=delay,
        consecutive_failures=c,
    )
