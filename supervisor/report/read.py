"""A run's attempts as the cost model sees them, read from the store: each attempt's times, the steps and
stretches the monitor marked, and the decision that ended it (which rule, when the failure happened, when it
was seen)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from supervisor.domain.overrides import resume_step
from supervisor.domain.runs import (
    UNRECOGNISED,
    AttemptMark,
    AttemptRow,
    AttemptState,
    DecisionRow,
    RunRow,
    StepMark,
)
from supervisor.report.costs import AttemptFacts, Cost, Failure, cost
from supervisor.store import Store

NOT_FAILURES = frozenset({"completed", "pending"})


@dataclass(frozen=True, slots=True)
class RunReport:
    """One run's cost, with what the picture and the text need to name it."""

    run: RunRow
    cost: Cost
    gpus: float
    gpu_unit: str  # "GPU" or "node" (a spec asking for no GPUs is counted in node-hours)


def gpus_of(run: RunRow) -> tuple[float, str]:
    s = run.spec.slurm
    if s.gpus_per_node > 0:
        return float(s.nodes * s.gpus_per_node), "GPU"
    return float(s.nodes), "node"


def ending_decision(decisions: Sequence[DecisionRow], n: int) -> DecisionRow | None:
    """The decision that settled attempt n's fate: its first steering one (resume, give up...), else an
    unrecognised end; alerts about pending jobs and completions are no failure."""
    own = [
        d
        for d in decisions
        if d.attempt == n
        and d.acted
        and str(d.evidence.get("policy", {}).get("category", "")) not in NOT_FAILURES
    ]
    for d in own:
        if d.steering:
            return d
    return next((d for d in own if d.rule == UNRECOGNISED), None)


def failure_of(d: DecisionRow) -> Failure:
    """When the failure happened: a timer's start (the last progress of a stall), else when the rule saw its
    evidence (a line read, a state polled), else when it was decided."""
    category = str(d.evidence.get("policy", {}).get("category", "failure"))
    since, seen = d.evidence.get("since"), d.evidence.get("seen_at")
    when = since if isinstance(since, int | float) else seen if isinstance(seen, int | float) else d.at
    return Failure(rule=d.rule, category=category, failed_at=min(float(when), d.at), detected_at=d.at)


def attempt_facts(
    run: RunRow,
    attempts: Sequence[AttemptRow],
    decisions: Sequence[DecisionRow],
    steps: Sequence[StepMark],
    marks: Sequence[AttemptMark],
) -> list[AttemptFacts]:
    gpus, _ = gpus_of(run)
    spec = run.spec
    real = [a for a in attempts if a.state != AttemptState.NEVER_SUBMITTED]
    out: list[AttemptFacts] = []
    for i, a in enumerate(real):
        own_steps = sorted((s.step, s.at) for s in steps if s.attempt == a.n)
        own_marks = [m for m in marks if m.attempt == a.n]
        d = ending_decision(decisions, a.n)
        failure = failure_of(d) if d is not None else None
        nxt = real[i + 1] if i + 1 < len(real) else None
        if nxt is not None:
            kept = resume_step(nxt.overrides, spec)
        elif d is not None:
            after = d.evidence.get("policy", {}).get("ckpt_after")
            kept = int(after) if isinstance(after, int) else None
        else:
            kept = None
        out.append(
            AttemptFacts(
                n=a.n,
                gpus=gpus,
                submitted_at=a.intent_at,
                started_at=a.started_at,
                ended_at=a.ended_at,
                start_step=resume_step(a.overrides, spec),
                steps=tuple(own_steps),
                ray_up_at=min((m.at for m in own_marks if m.kind == "ray_up"), default=None),
                training_at=min((m.at for m in own_marks if m.kind == "training"), default=None),
                stretches=tuple(
                    (m.kind, m.at, m.until) for m in own_marks if m.kind in ("validation", "checkpointing")
                ),
                checkpoints=tuple(
                    sorted((m.step, m.at) for m in own_marks if m.kind == "checkpoint" and m.step is not None)
                ),
                rewards=tuple((s.at, s.reward) for s in steps if s.attempt == a.n and s.reward is not None),
                failure=failure,
                kept_step=kept,
                started_from=a.started_from,
                ended_from=a.ended_from,
            )
        )
    return out


def run_report(store: Store, run: RunRow, now: float) -> RunReport:
    """The run's cost as the store knows it at `now` (a live attempt counts up to `now`)."""
    facts = attempt_facts(
        run, store.attempts(run.id), store.decisions(run.id), store.steps(run.id), store.marks(run.id)
    )
    gpus, unit = gpus_of(run)
    return RunReport(run, cost(facts, now), gpus, unit)
