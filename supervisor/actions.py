"""The one place that acts: a rule match becomes one recorded decision and its effects.

The engine decides *what happened*; the policy decides *whether to resume*;
this module records the decision (once per incident, even across restarts,
thanks to the store's unique index) and then cancels, schedules the resume
with the rule's fix, holds, or alerts.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from supervisor.checkpoints import choose_in_dir, list_checkpoint_dir
from supervisor.events import JobState
from supervisor.notify import EventSink, Level, LogSink, RunEvent
from supervisor.policy import AttemptRecord, Decision, PolicyConfig, decide
from supervisor.rules.engine import Match
from supervisor.rules.model import MissingPlaceholder, render_template
from supervisor.slurm.client import SlurmError
from supervisor.spec import JobSpec
from supervisor.store import AttemptRow, AttemptState, RunRow, RunState, Store
from supervisor.submission import AttemptOverrides

if TYPE_CHECKING:
    from supervisor.daemon import Daemon

log = structlog.get_logger(__name__)

ACTIVE = {"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED", "REQUEUED"}


def newest_checkpoint_step(spec: JobSpec) -> int | None:
    if spec.checkpoint is None:
        return None
    from supervisor.checkpoints import discover

    cps = discover(list_checkpoint_dir(spec.checkpoint.dir), spec.checkpoint.metric)
    return max((c.step for c in cps), default=None)


def resolve_checkpoint(spec: JobSpec, selector: str) -> tuple[str | None, str]:
    """(path or None, why) for latest / best / step_N among the spec's checkpoints."""
    if spec.checkpoint is None:
        return None, "the spec names no checkpoint dir: the trainer resumes by itself"
    ck = spec.checkpoint
    choice, path = choose_in_dir(
        ck.dir, selector, metric=ck.metric, higher_is_better=ck.higher_is_better, keep_top_k=ck.keep_top_k
    )
    return (str(path) if path else None), choice.reason


def resolve_checkpoint_for_run(run: RunRow, selector: str) -> tuple[str | None, str]:
    return resolve_checkpoint(JobSpec.model_validate_json(run.spec_json), selector)


def policy_config(spec: JobSpec) -> PolicyConfig:
    return PolicyConfig(
        max_retries=max(0, spec.resume.max_attempts - 1),
        backoff_base_s=spec.resume.backoff_s,
        backoff_cap_s=max(spec.resume.backoff_s, spec.resume.backoff_max_s),
    )


def history(
    store: Store, run_id: str, current: Match | None = None, run_cap: int | None = None
) -> list[AttemptRecord]:
    """Each finished attempt as the policy sees it, from the store's attempts and acting decisions.

    `run_cap` is the spec's own budget (resume.max_attempts - 1): a rule may allow fewer retries, never more.
    """
    acting: dict[int, dict[str, Any]] = {}
    for d in store.decisions(run_id):
        if d.attempt is not None and d.outcome not in ("followup", "ignored"):
            acting[d.attempt] = {
                "rule": d.rule,
                "signature": d.signature,
                **d.evidence.get("policy", {}),
            }
    records = []
    for a in store.attempts(run_id):
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
                "ckpt_after": info.get("ckpt_after"),
            }
        if not info:
            continue
        records.append(
            AttemptRecord(
                attempt=a.n,
                category=str(info.get("category", "failure")),
                started_at=a.started_at,
                ended_at=a.ended_at or time.time(),
                rule=info.get("rule"),
                signature=info.get("signature"),
                retryable=bool(info.get("retryable", True)),
                deterministic=bool(info.get("deterministic", False)),
                max_retries=_capped(info, run_cap),
                checkpoint_before=a.overrides.get("ckpt_step_at_submit"),
                checkpoint_after=info.get("ckpt_after"),
            )
        )
    return records


def _capped(info: dict[str, Any], run_cap: int | None) -> int | None:
    own = info.get("max_retries")
    if own is None and run_cap is not None:
        base = PolicyConfig()
        own = base.deterministic_max_retries if info.get("deterministic") else base.max_retries
    if own is None:
        return None
    return min(int(own), run_cap) if run_cap is not None else int(own)


class Actions:
    def __init__(self, daemon: Daemon, sink: EventSink | None = None, clock: Callable[[], float] = time.time):
        self.daemon = daemon
        self.store: Store = daemon.store
        self.sink: EventSink = sink or LogSink()
        self.clock = clock

    def notify(self, event: RunEvent) -> None:
        self.sink.publish(event)

    def plot(self, run: RunRow) -> None:
        """Reward and validation curves into the run's thread: people would rather look than read."""
        try:
            from supervisor.metrics_source import run_metric_points
            from supervisor.plot import render_curves

            points = run_metric_points(self.store, self.daemon.settings, run)
            if not points:
                return
            png = render_curves(points, self.daemon.run_dir(run) / "curves.png", title=run.id)
            self.sink.publish_plot(run.id, str(png), f"{run.name}: reward and validation")
        except Exception:
            log.exception("could not draw the run's curves", run_id=run.id)

    async def on_match(self, run: RunRow, attempt: AttemptRow, m: Match) -> None:
        """Record the match as a decision (once per incident) and carry out its actions."""
        spec = self.daemon.spec_of(run)
        ckpt_after = newest_checkpoint_step(spec)
        evidence = {
            "source": m.evidence.source,
            "first_line": m.evidence.first_line,
            "match_line": m.line,
            "lines": list(m.evidence.lines[-40:]),
            "state": m.evidence.state,
            "node": m.node,
            "excerpt": m.excerpt,
            "policy": {
                "category": m.category,
                "retryable": m.retryable,
                "deterministic": m.deterministic,
                "max_retries": m.max_retries,
                "ckpt_after": ckpt_after,
            },
        }
        if m.followup:
            self.store.record_decision(
                run.id,
                attempt.n,
                rule=m.rule,
                action="none",
                signature=f"followup:{m.signature}",
                reason=f"part of the {m.followup_of} incident",
                evidence=evidence,
            )
            return
        decision_id = self.store.record_decision(
            run.id,
            attempt.n,
            rule=m.rule,
            action=",".join(m.action_names),
            signature=m.signature,
            reason=m.reason,
            evidence=evidence,
        )
        if decision_id is None:
            log.info(
                "decision already taken for this incident", run_id=run.id, attempt=attempt.n, rule=m.rule
            )
            return
        run = self.store.get_run(run.id) or run
        if run.state.is_final and run.state != RunState.FAILED:
            self.store.set_decision_outcome(decision_id, f"ignored: run is {run.state.value}")
            return
        if attempt.n != (self.store.latest_attempt(run.id) or attempt).n:
            self.store.set_decision_outcome(decision_id, "ignored: a newer attempt exists")
            return
        outcome = await self._carry_out(run, attempt, m, spec, decision_id)
        self.store.set_decision_outcome(decision_id, outcome)
        log.info("decision", run_id=run.id, attempt=attempt.n, rule=m.rule, outcome=outcome)

    async def _carry_out(
        self, run: RunRow, attempt: AttemptRow, m: Match, spec: JobSpec, decision_id: int
    ) -> str:
        ctx = m.template_context(attempt.job_id or "", self._spec_context(spec))
        outcomes: list[str] = []
        alert_text = ""
        alert_level: Level = "warning"
        for action in m.actions:
            if action.alert is not None:
                alert_level = action.alert.level
                try:
                    alert_text = render_template(action.alert.message, ctx)
                except MissingPlaceholder as exc:
                    alert_text = f"{run.id}: {m.rule}: {m.reason} (bad template: {exc})"
        for action in m.actions:
            if action.resume is not None:
                outcomes.append(await self._resume(run, attempt, m, spec, action.resume, ctx, alert_text))
            elif action.give_up is not None:
                outcomes.append(await self._give_up(run, attempt, action.give_up.reason or m.reason, m))
            elif action.cancel is not None:
                outcomes.append(await self._cancel(run, attempt, m))
            elif action.hold is not None:
                outcomes.append(await self._hold(run, attempt, m))
        if alert_text and not any(("resuming" in o or "gave up" in o) for o in outcomes):
            level: Level = "info" if m.category == "completed" else alert_level
            self.notify(
                RunEvent(
                    run.id,
                    "completed" if m.category == "completed" else "alert",
                    alert_text,
                    level=level,
                    excerpt="\n".join(m.evidence.lines[-20:]) or None,
                    rule=m.rule,
                    needs_human=level == "error",
                )
            )
            outcomes.append("alerted")
        if m.category == "completed" and not outcomes[:-1]:
            self.store.set_run_state(run.id, RunState.COMPLETED, reason="completed")
            self.plot(run)
        return "; ".join(outcomes) or "recorded"

    def _spec_context(self, spec: JobSpec) -> dict[str, str]:
        ctx = {"name": spec.name}
        if spec.shared_cache_dir is not None:
            ctx["shared_cache_dir"] = str(spec.shared_cache_dir)
        if spec.checkpoint is not None:
            ctx["checkpoint_dir"] = str(spec.checkpoint.dir)
        return ctx

    async def _stop_job(self, attempt: AttemptRow) -> str:
        if attempt.job_id and attempt.ended_at is None and (attempt.slurm_state or "PENDING") in ACTIVE:
            try:
                await self.daemon.slurm.cancel(attempt.job_id)
            except SlurmError as exc:
                return f"scancel {attempt.job_id} failed: {exc}"
            return f"cancelled job {attempt.job_id}"
        return ""

    async def _resume(
        self,
        run: RunRow,
        attempt: AttemptRow,
        m: Match,
        spec: JobSpec,
        action: Any,
        ctx: dict[str, str],
        alert_text: str,
    ) -> str:
        cfg = policy_config(spec)
        decision: Decision = decide(history(self.store, run.id, m, cfg.max_retries), self.clock(), cfg)
        if decision.action != "resume":
            return await self._give_up(run, attempt, decision.reason, m, alert_text=alert_text)
        selector = action.from_ if action.from_ != "latest" else spec.resume.checkpoint
        ckpt, why = resolve_checkpoint(spec, selector)
        env = {}
        missing = []
        for key, tmpl in action.env.items():
            try:
                env[key] = render_template(tmpl, ctx)
            except MissingPlaceholder as exc:
                missing.append(f"{key} ({exc})")
        if missing:
            return await self._give_up(
                run,
                attempt,
                f"{m.rule} needs {', '.join(missing)} in the spec to apply its fix",
                m,
                alert_text=alert_text,
            )
        prev = AttemptOverrides.from_dict(attempt.overrides)
        exclude = set(prev.exclude)
        if action.exclude_node and m.node:
            exclude.add(m.node)
        overrides = AttemptOverrides(
            checkpoint=ckpt,
            env={**prev.env, **env},
            sbatch_args=tuple(dict.fromkeys([*prev.sbatch_args, *action.sbatch_args])),
            exclude=tuple(sorted(exclude)),
            reason=f"{m.rule}: {m.reason}",
        )
        stopped = await self._stop_job(attempt)
        at = max(decision.at, self.clock())
        changes = [f"{k}={v}" for k, v in env.items()]
        if action.exclude_node and m.node:
            changes.append(f"--exclude={m.node}")
        changes += list(action.sbatch_args)
        what = f"resuming from {Path(ckpt).name}" if ckpt else "resuming (no checkpoint yet: from the start)"
        detail = f"{what} in {max(0.0, at - self.clock()):.0f}s; {decision.reason}" + (
            f"; changed: {', '.join(changes)}" if changes else ""
        )
        self.daemon.schedule(run.id, at=at, overrides=overrides, reason=f"{m.rule}: {detail}")
        self.notify(
            RunEvent(
                run.id,
                "resumed",
                alert_text or f"{run.id}: {m.rule}: {m.reason}",
                text=f"{detail}. {why}",
                level="warning",
                excerpt="\n".join(m.evidence.lines[-20:]) or None,
                rule=m.rule,
                fields={
                    "checkpoint": ckpt or "-",
                    "attempt": str(attempt.n + 1),
                    "changes": ", ".join(changes) or "-",
                },
            )
        )
        return "; ".join(x for x in (stopped, detail) if x)

    async def _give_up(
        self, run: RunRow, attempt: AttemptRow, reason: str, m: Match, alert_text: str = ""
    ) -> str:
        stopped = await self._stop_job(attempt)
        self.store.set_run_state(
            run.id,
            RunState.GAVE_UP,
            reason=reason,
            event=("gave-up", reason, {"rule": m.rule}),
            attempt=attempt.n,
        )
        self.notify(
            RunEvent(
                run.id,
                "gave_up",
                alert_text or f"{run.id}: gave up: {reason}",
                text=reason,
                level="error",
                excerpt="\n".join(m.evidence.lines[-20:]) or None,
                rule=m.rule,
                needs_human=True,
            )
        )
        self.plot(run)
        return "; ".join(x for x in (stopped, f"gave up: {reason}") if x)

    async def _cancel(self, run: RunRow, attempt: AttemptRow, m: Match) -> str:
        stopped = await self._stop_job(attempt)
        self.store.set_run_state(
            run.id,
            RunState.CANCELLED,
            reason=f"cancelled by rule {m.rule}",
            event=("cancelled", f"cancelled by rule {m.rule}", {}),
            attempt=attempt.n,
        )
        return stopped or "cancelled"

    async def _hold(self, run: RunRow, attempt: AttemptRow, m: Match) -> str:
        if attempt.job_id and attempt.slurm_state == "PENDING":
            try:
                await self.daemon.slurm.hold(attempt.job_id)
            except SlurmError as exc:
                return f"hold failed: {exc}"
            self.store.set_run_state(
                run.id,
                RunState.HELD,
                held=True,
                event=("held", f"held by rule {m.rule}", {}),
                attempt=attempt.n,
            )
            return f"held job {attempt.job_id}"
        return "hold skipped: the job is not pending"

    async def on_unmatched_end(
        self, run: RunRow, attempt: AttemptRow, state: JobState, exit_code: int | None
    ) -> None:
        """An attempt ended and no rule claimed it: completed is done; anything else waits for a human."""
        run = self.store.get_run(run.id) or run
        if run.state.is_final or run.state in (RunState.BACKOFF, RunState.QUEUED, RunState.SUBMITTING):
            return
        if attempt.n != (self.store.latest_attempt(run.id) or attempt).n:
            return
        if state == JobState.COMPLETED:
            self.store.set_run_state(run.id, RunState.COMPLETED, reason="completed")
            self.notify(RunEvent(run.id, "completed", f"{run.id} completed", level="info"))
            self.plot(run)
            return
        code = f" (exit {exit_code})" if exit_code is not None else ""
        reason = f"attempt {attempt.n} ended {state.value}{code} and no rule recognised the failure"
        decision_id = self.store.record_decision(
            run.id,
            attempt.n,
            rule="unrecognised-failure",
            action="alert",
            signature=f"unrecognised:{state.value}",
            reason=reason,
            evidence={"state": state.value, "exit_code": exit_code},
        )
        if decision_id is None:
            return
        self.store.set_run_state(
            run.id,
            RunState.FAILED,
            reason=reason,
            event=("failed", reason, {"state": state.value}),
            attempt=attempt.n,
        )
        self.store.set_decision_outcome(decision_id, "alerted; waiting for a human (`shepherd resume`)")
        self.notify(RunEvent(run.id, "alert", f"{run.id}: {reason}", level="error", needs_human=True))
