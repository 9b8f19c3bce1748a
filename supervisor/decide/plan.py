"""What a rule match does, as data: the match, the run's history and the spec's settings in, the effects
to carry out out (resume with a fix, give up, cancel, hold, alert, complete), so every outcome of a rule
is unit-tested without Slurm, files or SQLite; `act/actions.py` carries them out.

What people are told is composed here too: the rule's message says the cause only, and `announce` adds
what was actually done (resuming from step N, gave up because ..., held, alert only), so the two cannot
disagree."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from supervisor.decide.policy import AttemptRecord, PolicyConfig, decide
from supervisor.domain.jobstate import JobState
from supervisor.domain.notices import Level
from supervisor.domain.runs import UNRECOGNISED
from supervisor.domain.trainer_files import STEP_DIR_RE
from supervisor.rules.engine import Evidence, Match
from supervisor.rules.model import Action, MissingPlaceholder, ResumeAction, render_template


@dataclass(frozen=True, slots=True)
class Resume:
    """Submit the next attempt at `at` from the checkpoint `selector` names, with the rule's fix."""

    selector: str  # latest | best | step_N
    at: float
    why: str  # the policy's reason (budget, backoff)
    env: Mapping[str, str] = field(default_factory=dict)
    mounts: tuple[str, ...] = ()
    sbatch_args: tuple[str, ...] = ()
    exclude_node: bool = False
    let_job_finish: bool = False
    before_step: int | None = None  # a rollback: only checkpoints saved before this step
    rollback: bool = False  # a rollback whose step the match did not see (a log line): found by the executor


@dataclass(frozen=True, slots=True)
class GiveUp:
    reason: str


@dataclass(frozen=True, slots=True)
class Cancel:
    pass


@dataclass(frozen=True, slots=True)
class Hold:
    pass


@dataclass(frozen=True, slots=True)
class Alert:
    """Tell people (the rule's own message) when no resume or give-up says it already."""

    kind: Literal["alert", "completed"]
    level: Level


@dataclass(frozen=True, slots=True)
class Complete:
    """The run is done: mark it completed and post its curves."""


Effect = Resume | GiveUp | Cancel | Hold | Alert | Complete
STEERING = (Resume, GiveUp, Cancel, Hold)


@dataclass(frozen=True, slots=True)
class Plan:
    effects: tuple[Effect, ...]
    alert_text: str = ""  # the rule's rendered alert message ("" when it has none)


def unrecognised_resume(
    run_id: str,
    attempt: int,
    state: JobState,
    why: str,
    *,
    step_before: int | None,
    step_after: int | None,
    at: float,
    lines: Sequence[str] = (),
    trained_to: int | None = None,
) -> Match | None:
    """An end no rule claimed, as a match that resumes once from the latest checkpoint; None: wait for a
    human.

    Only a FAILED end (not a cancel, which a person or Slurm did on purpose) of an attempt that made
    progress first: it saved a newer checkpoint than it started from (`step_before`), or it trained past
    that step (`trained_to`, the furthest step it logged) before its next save came. One that ran and
    advanced, then crashed on something nobody wrote a rule for, is at scale most unknown crashes, and
    stopping idles the allocation until someone reads the alert; restarted in place, an attempt is often
    shorter than the save period, so steps are the progress that shows. One that crashed before its first
    step (start-up, loading: possibly deterministic) waits for a human. The policy gives it one retry
    (`max_retries: 1`) and stops at the second unrecognised end in a row (`same_signature_limit: 2`),
    progress or not: a crash that recurs is a pattern a person should look at (and write a rule for).
    """
    if state != JobState.FAILED or step_after is None:
        return None
    if step_before is None or step_after > step_before:
        done = f"it saved step_{step_after} first"
    elif trained_to is not None and trained_to > step_before:
        done = f"it trained from step {step_before} to step {trained_to} first (no newer checkpoint yet)"
    else:
        return None
    reason = f"{why}; {done}, so resuming once from the latest checkpoint (worth a rule if it recurs)"
    return unrecognised_match(run_id, attempt, state, reason, at, lines)


def unrecognised_match(
    run_id: str, attempt: int, state: JobState, reason: str, at: float, lines: Sequence[str] = ()
) -> Match:
    """The match behind an unrecognised end's resume (also rebuilt from its decision after a crash); its
    evidence lines are the logs' decisive lines (`file:line: text`, act/decisive.py)."""
    return Match(
        rule=UNRECOGNISED,
        run_id=run_id,
        attempt=attempt,
        priority=0,
        category="failure",
        actions=(Action(resume=ResumeAction()),),
        evidence=Evidence(source="slurm", state=state.value, at=at, lines=tuple(lines)),
        signature=f"unrecognised:{state.value}",
        reason=reason,
        max_retries=1,
        same_signature_limit=2,  # twice in a row, progress or not, is a pattern: a person looks
    )


def alert_message(m: Match, context: Mapping[str, str]) -> tuple[str, Level]:
    """The rule's alert text (rendered) and level; a template naming something unknown still alerts."""
    text = ""
    level_: Level = "warning"
    for action in m.actions:
        if action.alert is not None:
            level_ = action.alert.level
            try:
                text = render_template(action.alert.message, dict(context))
            except MissingPlaceholder as exc:
                text = f"{m.run_id}: {m.rule}: {m.reason} (bad template: {exc})"
    return text, level_


def plan_match(
    m: Match,
    history: Sequence[AttemptRecord],
    cfg: PolicyConfig,
    *,
    now: float,
    context: Mapping[str, str],
    default_checkpoint: str = "latest",
    unfinished: str | None = None,
) -> Plan:
    """The effects of `m`'s actions, in order.

    `history` ends with the attempt `m` belongs to (see decide/history.py); `context` fills the rule's
    templates (`{run}`, `{spec.shared_cache_dir}`...); `default_checkpoint` is the spec's `resume.checkpoint`,
    used where a rule says `from: latest`. `unfinished` says why a run that looks completed has steps left
    (act/checkpoints.py); then the chain goes on like after a time limit.
    """
    if m.category == "completed" and unfinished is not None:
        return _continue_chain(m, history, cfg, now, default_checkpoint, unfinished)
    alert_text, alert_level = alert_message(m, context)
    effects: list[Effect] = []
    for action in m.actions:
        if action.resume is not None:
            effects.append(_resume(m, action.resume, history, cfg, now, context, default_checkpoint))
        elif action.give_up is not None:
            effects.append(GiveUp(action.give_up.reason or m.reason))
        elif action.cancel is not None:
            effects.append(Cancel())
        elif action.hold is not None:
            effects.append(Hold())
    if alert_text and not any(isinstance(e, Resume | GiveUp) for e in effects):
        completed = m.category == "completed"
        effects.append(Alert("completed" if completed else "alert", "info" if completed else alert_level))
    if m.category == "completed" and not any(isinstance(e, STEERING) for e in effects):
        effects.append(Complete())
    return Plan(tuple(effects), alert_text)


def _continue_chain(
    m: Match,
    history: Sequence[AttemptRecord],
    cfg: PolicyConfig,
    now: float,
    default_checkpoint: str,
    unfinished: str,
) -> Plan:
    """Exit 0 before the last step (a save deadline): the policy sees a time limit, which costs no budget
    when the attempt wrote a checkpoint and is a failure when it did not."""
    past = list(history)
    if past and past[-1].attempt == m.attempt:
        past[-1] = replace(past[-1], category="time_limit")
    decision = decide(past, now, cfg)
    text = f"{m.run_id}: the job exited 0 but the run is not finished: {unfinished}"
    if decision.action != "resume":
        return Plan((GiveUp(f"{unfinished}; {decision.reason}"),), text)
    resume = Resume(selector=default_checkpoint, at=max(decision.at, now), why=decision.reason)
    return Plan((resume,), text)


def _resume(
    m: Match,
    action: ResumeAction,
    history: Sequence[AttemptRecord],
    cfg: PolicyConfig,
    now: float,
    context: Mapping[str, str],
    default_checkpoint: str,
) -> Resume | GiveUp:
    decision = decide(history, now, cfg)
    if decision.action != "resume":
        return GiveUp(decision.reason)
    env: dict[str, str] = {}
    mounts: list[str] = []
    missing = []
    for key, tmpl in action.env.items():
        try:
            env[key] = render_template(tmpl, dict(context))
        except MissingPlaceholder as exc:
            missing.append(f"{key} ({exc})")
    for tmpl in action.mounts:
        try:
            mounts.append(render_template(tmpl, dict(context)))
        except MissingPlaceholder as exc:
            missing.append(f"a container mount ({exc})")
    if missing:
        return GiveUp(f"{m.rule} needs {', '.join(missing)} in the spec to apply its fix")
    return Resume(
        selector=action.from_ if action.from_ != "latest" else default_checkpoint,
        at=max(decision.at, now),
        why=decision.reason,
        env=env,
        mounts=tuple(mounts),
        sbatch_args=tuple(action.sbatch_args),
        exclude_node=action.exclude_node,
        let_job_finish=action.let_job_finish,
        before_step=m.evidence.step if action.before_divergence else None,
        rollback=action.before_divergence,
    )


DIVERGENCE_TAGS = ("train:loss", "train:reward", "train:grad_norm")


def divergence_step(points: Sequence[tuple[str, int, float]]) -> int | None:
    """The first step whose loss, reward or grad norm is NaN/inf (Shepherd's names): where a run diverged,
    for a rollback decided on a log line, which names no step."""
    bad = [step for tag, step, value in points if tag in DIVERGENCE_TAGS and not math.isfinite(value)]
    return min(bad) if bad else None


# ---- what people are told -------------------------------------------------------------------------------

ALERT_ONLY = "alert only: nothing was changed"


def announce(cause: str, decisions: Sequence[str]) -> str:
    """An alert's text: the rule's message (the cause), then what was done about it."""
    said = "; ".join(d for d in decisions if d) or ALERT_ONLY
    return f"{cause.rstrip().rstrip('.')} — {said}"


def resumed(checkpoint: str | None, attempt: int, delay_s: float, why: str = "") -> str:
    """`resuming from step 40 as attempt 3 in 60 s`; or without a checkpoint, saying why there is none."""
    when = f" in {delay_s:.0f} s" if delay_s >= 1 else ""
    if checkpoint is None:
        return f"resuming without a checkpoint as attempt {attempt}{when} ({why})"
    name = Path(checkpoint).name
    m = STEP_DIR_RE.match(name)
    where = f"step {m.group(1)}" if m else name
    return f"resuming from {where} as attempt {attempt}{when}"


def gave_up(reason: str) -> str:
    return f"gave up: {reason}"


def held(job_id: str | None) -> str:
    return f"held job {job_id} (it stays pending until released)" if job_id else "held"


def not_held(why: str) -> str:
    return f"not held ({why}): {ALERT_ONLY}"


def cancelled(job_id: str | None) -> str:
    return f"cancelled job {job_id} and the run" if job_id else "cancelled the run"
