"""A run's past as the resume policy sees it: its attempts and the decisions taken about them, turned
into `AttemptRecord`s (pure: rows in, records out)."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
from pathlib import Path
from typing import Any

from supervisor.decide.policy import AttemptRecord, PolicyConfig
from supervisor.domain.runs import AttemptRow, AttemptState, DecisionRow
from supervisor.domain.spec import JobSpec
from supervisor.domain.trainer_files import STEP_DIR_RE
from supervisor.rules.engine import Match


def policy_config(spec: JobSpec) -> PolicyConfig:
    """The spec's resume budget and backoff as the policy's settings."""
    cap = max(0, spec.resume.max_attempts - 1)
    base = PolicyConfig()
    return PolicyConfig(
        max_retries=cap,
        # Node faults have their own budget, which a run's own explicit cap still bounds.
        node_fault_max_retries=(
            min(cap, base.node_fault_max_retries)
            if "max_attempts" in spec.resume.model_fields_set
            else base.node_fault_max_retries
        ),
        backoff_base_s=spec.resume.backoff_s,
        backoff_cap_s=max(spec.resume.backoff_s, spec.resume.backoff_max_s),
    )


def attempt_records(
    attempts: Sequence[AttemptRow],
    decisions: Sequence[DecisionRow],
    *,
    now: float,
    current: Match | None = None,
    run_cap: int | None = None,
) -> list[AttemptRecord]:
    """Each finished attempt as the policy sees it, from a run's attempts and acting decisions.

    `current` is the match being decided (its attempt has no decision yet); `run_cap` is the spec's own
    budget (resume.max_attempts - 1): a rule may allow fewer retries, never more.
    """
    acting: dict[int, dict[str, Any]] = {}
    steered: set[int] = set()
    for d in decisions:
        # The decision that steered an attempt speaks for it; a later alert (a completion noticed after the
        # resume, a follow-up folded into the incident) must not hide the failure from the policy's streaks.
        if d.attempt is None or not d.acted or (d.attempt in steered and not d.steering):
            continue
        if d.steering:
            steered.add(d.attempt)
        acting[d.attempt] = {
            "rule": d.rule,
            "signature": d.signature,
            **d.evidence.get("policy", {}),
        }
    # What each resume excluded that its attempt had not: the node that attempt's fault was pinned on.
    newly_excluded: dict[int, str] = {}
    excluded = [(a.n, set(a.overrides.get("exclude") or ())) for a in attempts]
    for (n, before), (_, after) in pairwise(excluded):
        if after - before:
            newly_excluded[n] = min(after - before)
    records = []
    for a in attempts:
        if a.state in (AttemptState.NEVER_SUBMITTED,):
            continue
        info = acting.get(a.n, {})
        if current is not None and a.n == current.attempt:
            info = {
                "rule": current.rule,
                "signature": current.signature,
                "category": current.category,
                "retryable": current.retryable,
                "deterministic": current.deterministic,
                "max_retries": current.max_retries,
                "same_signature_limit": current.same_signature_limit,
                "ckpt_after": info.get("ckpt_after"),
            }
        if not info:
            continue
        records.append(
            AttemptRecord(
                attempt=a.n,
                category=str(info.get("category", "failure")),
                started_at=a.started_at,
                ended_at=a.ended_at or now,
                rule=info.get("rule"),
                signature=info.get("signature"),
                retryable=bool(info.get("retryable", True)),
                deterministic=bool(info.get("deterministic", False)),
                max_retries=_capped(info, run_cap),
                same_signature_limit=info.get("same_signature_limit"),
                checkpoint_before=_step_at_submit(a.overrides),
                checkpoint_after=info.get("ckpt_after"),
                resumed_by_human=bool(a.overrides.get("resumed_by")),
                fault_node=(
                    current.fault_node
                    if current is not None and a.n == current.attempt
                    else newly_excluded.get(a.n)
                ),
            )
        )
    return records


def _step_at_submit(overrides: dict[str, Any]) -> int | None:
    """A staged attempt's newest step at submission is the step it was staged from, not the original dir's."""
    if overrides.get("checkpoint_dir") and overrides.get("checkpoint"):
        m = STEP_DIR_RE.match(Path(str(overrides["checkpoint"])).name)
        if m is not None:
            return int(m.group(1))
    step = overrides.get("ckpt_step_at_submit")
    return int(step) if step is not None else None


def _capped(info: dict[str, Any], run_cap: int | None) -> int | None:
    own = info.get("max_retries")
    if own is None and run_cap is not None:
        base = PolicyConfig()
        own = base.deterministic_max_retries if info.get("deterministic") else base.max_retries
    if own is None:
        return None
    return min(int(own), run_cap) if run_cap is not None else int(own)
