"""The one place that acts: a rule match becomes one recorded decision and its effects.

The engine decides *what happened*; the policy decides *whether to resume*;
this module records the decision (once per incident, even across restarts,
thanks to the store's unique index) and then cancels, schedules the resume
with the rule's fix, holds, or alerts.

Crash safety: a decision's messages are queued (Slack outbox rows) in the same
SQLite transaction that records its outcome, so an empty outcome means "not
carried out, nothing said yet". After a restart `finish_unfinished` carries
such decisions out again (their state changes are idempotent), so a SIGKILL
between recording a decision and acting on it neither loses the action nor
repeats a message.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path

import anyio
import structlog
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from supervisor.act.checkpoints import newest_checkpoint_step, resolve_checkpoint, unfinished
from supervisor.act.curves import run_points
from supervisor.act.decisive import decisive_lines
from supervisor.act.forensics import Forensics
from supervisor.act.inplace import WordTaken, driver_run_in, give_run, job_runner_dir, read_exit
from supervisor.decide import staging
from supervisor.decide.checkpoints import choose_in_dir
from supervisor.decide.history import attempt_records, policy_config
from supervisor.decide.inplace import in_place_refusal, spare_for
from supervisor.decide.plan import (
    Alert,
    Cancel,
    Complete,
    GiveUp,
    Hold,
    Resume,
    announce,
    cancelled,
    divergence_step,
    gave_up,
    held,
    not_held,
    plan_match,
    resumed,
    unrecognised_match,
    unrecognised_resume,
)
from supervisor.decide.policy import FREE_CATEGORIES
from supervisor.decide.stacks import StackSummary
from supervisor.domain.jobstate import JobState, describe_exit
from supervisor.domain.notices import Level, Notice
from supervisor.domain.overrides import AttemptOverrides
from supervisor.domain.runs import UNRECOGNISED, AttemptRow, AttemptState, DecisionRow, RunRow, RunState
from supervisor.domain.spec import JobSpec
from supervisor.faultpoints import crash_point
from supervisor.notify.plot import render_curves
from supervisor.notify.timeline import render_timeline
from supervisor.ports import NoticeSink, Scheduler, SlurmControl
from supervisor.report.read import run_report
from supervisor.report.text import timeline_title
from supervisor.rules.decisive import DecisiveLine
from supervisor.rules.engine import Evidence, Match, load_ruleset, spec_ruleset
from supervisor.rules.state import looks_like_ip
from supervisor.settings import Settings
from supervisor.slurm.client import SlurmError, SlurmUnavailable
from supervisor.slurm.command import as_argv, driver_command
from supervisor.slurm.launchers.runner import BY_RUN, ENDED_NAME, attempt_key, drain_script, run_script
from supervisor.slurm.parse import first_node, host_down
from supervisor.slurm.reconcile import in_place_tag
from supervisor.slurm.submit import attempt_log_base
from supervisor.store import Store

log = structlog.get_logger(__name__)

Effects = list[Callable[[], None]]  # a decision's messages, queued when its outcome commits
Investigation = tuple[RunRow, AttemptRow, Match, int]  # a hang's decision waiting for its forensics
# A failure whose processes may still be alive to show where they were (not a time limit, a preemption, a
# pending job), and the actions that end the job: the stacks are taken before those end it.
CAPTURED_FAILURES = frozenset({"failure", "node_failure"})
ENDS_THE_JOB = frozenset({"resume", "cancel", "give_up"})
MAX_INVESTIGATIONS = 16  # waiting at once; beyond, a hang is acted on without its stacks (said in the log)


@dataclass(frozen=True, slots=True)
class Done:
    """What carrying out one effect did: the outcome for the record, and for people the phrase that says it
    (`said`) and, for the effect that speaks for the decision, the kind of notice and its details."""

    outcome: str
    said: str = ""
    kind: str = ""  # resumed | gave_up | alert | completed | "" (says nothing by itself)
    level: Level = "warning"
    text: str = ""
    fields: dict[str, str] = field(default_factory=dict)
    plot: bool = False


class Actions:
    """Carries out what the rules and the policy decided, through the ports it is given."""

    def __init__(
        self,
        store: Store,
        slurm: SlurmControl,
        scheduler: Scheduler,
        sink: NoticeSink,
        settings: Settings,
        *,
        clock: Callable[[], float] = time.time,
        forensics: Forensics | None = None,
    ) -> None:
        self.store = store
        self.slurm = slurm
        self.scheduler = scheduler
        self.sink = sink
        self.settings = settings
        self.clock = clock
        # A rule's hold that Slurm could not be asked for (controller down): run id -> (attempt, job, rule),
        # asked again after each poll that reached Slurm (retry_owed_holds). In memory: a restart forgets it.
        self.holds_owed: dict[str, tuple[int, str, str]] = {}
        self.forensics = forensics
        # A hang's decision waits here for `run_forensics` (a daemon task), so taking the stacks never holds
        # up the monitor that found the hang; the decision is recorded (and finished after a restart) first.
        self._investigations: tuple[
            MemoryObjectSendStream[Investigation], MemoryObjectReceiveStream[Investigation]
        ]
        self._investigations = anyio.create_memory_object_stream[Investigation](MAX_INVESTIGATIONS)
        self._investigating = False

    def notify(self, event: Notice) -> None:
        self.sink.publish(event)

    def plot(self, run: RunRow, effects: Effects, focus: str | None = None) -> None:
        """Reward and validation curves into the run's thread (and `focus`, the metric a rule fired on):
        people would rather look than read."""
        try:
            points = self._metric_points(run)
            if not points:
                return
            out = self.settings.runs_dir / run.id / "curves.png"
            png = render_curves(points, out, title=run.id, focus=focus)
            what = (
                f"{run.name}: {focus}, reward and validation"
                if focus
                else f"{run.name}: reward and validation"
            )
            effects.append(lambda: self.sink.publish_plot(run.id, str(png), what))
        except Exception:
            log.exception("could not draw the run's curves", run_id=run.id)

    def _metric_points(self, run: RunRow) -> list[tuple[str, int, float]]:
        """The run's scalars under Shepherd's names, from whichever source its launches wrote (TensorBoard,
        metrics.jsonl or the driver log), so a metric a rule names is found whatever the trainer called it."""
        return run_points(self.store, self.settings.runs_dir, run)

    def timeline(self, run: RunRow, effects: Effects) -> None:
        """The finished run's timeline and goodput into its thread: what its failures cost, at a glance."""
        try:
            rep = run_report(self.store, run, self.clock())
            png = render_timeline(rep, self.settings.runs_dir / run.id / "timeline.png")
            title = timeline_title(rep)
            effects.append(lambda: self.sink.publish_plot(run.id, str(png), title))
        except Exception:
            log.exception("could not draw the run's timeline", run_id=run.id)

    def _commit(self, decision_id: int, outcome: str, effects: Effects) -> None:
        """The decision's messages and its outcome commit in one transaction: both or neither."""
        crash_point("before-outcome")
        with self.store.tx():
            for effect in effects:
                try:
                    effect()  # the Slack notifier nests here (a SAVEPOINT on the same connection)
                except Exception:
                    log.exception("could not queue a decision's message", decision_id=decision_id)
            self.store.set_decision_outcome(decision_id, outcome)

    async def on_match(self, run: RunRow, attempt: AttemptRow, m: Match) -> None:
        """Record the match as a decision (once per incident) and carry out its actions."""
        spec = run.spec
        ckpt_after = newest_checkpoint_step(spec, attempt.overrides.get("checkpoint_dir"))
        evidence = {
            "source": m.evidence.source,
            "first_line": m.evidence.first_line,
            "match_line": m.line,
            "lines": list(m.evidence.lines[-40:]),
            "state": m.evidence.state,
            "node": m.node,
            "excerpt": m.excerpt,
            "metric": m.evidence.metric,
            "step": m.evidence.step,
            "seen_at": m.evidence.at or None,
            "since": m.evidence.since,
            "phase": m.evidence.phase or None,
            "bound_s": m.evidence.bound_s,
            "expected_s": m.evidence.expected_s,
            "policy": {
                "category": m.category,
                "retryable": m.retryable,
                "deterministic": m.deterministic,
                "max_retries": m.max_retries,
                "same_signature_limit": m.same_signature_limit,
                "ckpt_after": ckpt_after,
            },
        }
        if m.followup:
            followup_id = self.store.record_decision(
                run.id,
                attempt.n,
                rule=m.rule,
                action="none",
                signature=f"followup:{m.signature}",
                reason=f"part of the {m.followup_of} incident",
                evidence=evidence,
            )
            if followup_id is not None:  # once per signature; Slack folds it into the parent's incident
                # Under a planned hop (a preemption's NCCL errors) there is no incident: the log has it.
                fresh = self.store.get_run(run.id) or run
                hop = AttemptOverrides.from_dict(fresh.next_attempt).planned
                related = Notice(
                    run.id,
                    "related",
                    f"{m.rule}: {m.reason}",
                    level="debug" if hop else "warning",
                    rule=m.rule,
                    fields={"parent": m.inhibited_by} if m.inhibited_by else {},
                )
                self.notify(related)
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
        current = self._still_current(run, attempt, decision_id)
        if current is None:
            return
        run = current
        if m.category == "completed" and run.state.next_attempt_pending:
            # A rule already sent this attempt back (a rollback decided while the job was finishing): its
            # COMPLETED end must not complete the run before the next attempt is even submitted.
            self.store.set_decision_outcome(decision_id, "ignored: the next attempt is already decided")
            return
        crash_point("after-decision")
        if self._investigate_first(m, attempt) and not (
            # A crash of a driver under the runner: its traceback is the evidence, and its job waits for
            # Shepherd's word (stacks are taken of hangs only, while the driver still runs).
            m.category != "stall" and attempt.overrides.get("runner")
        ):
            try:
                self._investigations[0].send_nowait((run, attempt, m, decision_id))
                return
            except anyio.WouldBlock:
                log.warning("too many jobs under investigation: acting without stacks", run_id=run.id)
        await self._act(run, attempt, m, spec, decision_id)

    def _still_current(self, run: RunRow, attempt: AttemptRow, decision_id: int) -> RunRow | None:
        """The run, fresh from the store, while this decision about `attempt` is still to be carried out;
        else None, with the reason it is ignored recorded as the decision's outcome."""
        fresh = self.store.get_run(run.id) or run
        if fresh.state.is_final and fresh.state != RunState.FAILED:
            self.store.set_decision_outcome(decision_id, f"ignored: run is {fresh.state.value}")
            return None
        if attempt.n != (self.store.latest_attempt(run.id) or attempt).n:
            self.store.set_decision_outcome(decision_id, "ignored: a newer attempt exists")
            return None
        return fresh

    def _investigate_first(self, m: Match, attempt: AttemptRow) -> bool:
        """With a collector and its task running, the stacks are taken before acting on a hang of a live
        job, and (cheaply, `forensics.on_failures`) on a failure that ends a job whose processes still run."""
        cfg = self.settings.forensics
        if self.forensics is None or not self._investigating or not cfg.enabled or attempt.live_job is None:
            return False
        if m.category == "stall":
            return True
        return (
            cfg.on_failures
            and m.category in CAPTURED_FAILURES
            and attempt.slurm_state == JobState.RUNNING.value
            and any(a.kind in ENDS_THE_JOB for a in m.actions)
        )

    async def run_forensics(self) -> None:
        """The daemon task that takes a hung job's evidence, then carries out the decision waiting on it."""
        self._investigating = True
        try:
            async with anyio.create_task_group() as tg:
                async for item in self._investigations[1]:
                    tg.start_soon(self._investigate, *item)
        finally:
            self._investigating = False

    async def _investigate(self, run: RunRow, attempt: AttemptRow, m: Match, decision_id: int) -> None:
        stacks: StackSummary | None = None
        assert self.forensics is not None
        try:
            cheap = None if m.category == "stall" else self.settings.forensics.failure_timeout_s
            stacks = await self.forensics.capture(run, attempt, m.reason, timeout_s=cheap)
        except Exception:
            log.exception("forensics failed; acting without them", run_id=run.id, attempt=attempt.n)
        if stacks is not None:
            self.store.add_event(run.id, attempt.n, "forensics", stacks.headline()[:500], stacks.to_dict())
        fresh = self._still_current(run, attempt, decision_id)  # the stacks took time: is it still to do?
        if fresh is None:
            return
        try:
            await self._act(fresh, attempt, m, fresh.spec, decision_id, stacks)
        except Exception:
            log.exception("acting on a hang failed", run_id=run.id, rule=m.rule)

    async def _act(
        self,
        run: RunRow,
        attempt: AttemptRow,
        m: Match,
        spec: JobSpec,
        decision_id: int,
        stacks: StackSummary | None = None,
    ) -> None:
        effects: Effects = []
        outcome = await self._carry_out(run, attempt, m, spec, effects, stacks)
        self._commit(decision_id, outcome, effects)
        log.info("decision", run_id=run.id, attempt=attempt.n, rule=m.rule, outcome=outcome)

    # ---- after a restart --------------------------------------------------------------------------
    async def finish_unfinished(self) -> int:
        """Carry out every acting decision that was recorded but never carried out (the daemon died between).

        Its messages were not queued (they commit with the outcome) and its state changes are idempotent
        (scancel of an ended job is skipped; the same BACKOFF or final state is written again), so doing it
        again does it once. Called at start-up, before the scheduler runs. Returns how many were finished.
        """
        rows = self.store.db.execute(
            "SELECT DISTINCT run_id FROM decisions WHERE outcome = '' AND action != 'none'"
        ).fetchall()
        done = 0
        for (run_id,) in rows:
            for d in self.store.decisions(run_id):
                if d.outcome or d.action == "none" or d.attempt is None:
                    continue
                try:
                    await self._finish(run_id, d)
                except Exception:
                    log.exception("could not finish a decision after a restart", run_id=run_id, rule=d.rule)
                    continue
                done += 1
        return done

    async def _finish(self, run_id: str, d: DecisionRow) -> None:
        run = self.store.get_run(run_id)
        attempt = self.store.get_attempt(run_id, d.attempt or 0)
        if run is None or attempt is None:
            return
        log.warning(
            "carrying out a decision a crash interrupted", run_id=run_id, attempt=attempt.n, rule=d.rule
        )
        category = str(d.evidence.get("policy", {}).get("category", ""))
        if attempt.n != (self.store.latest_attempt(run_id) or attempt).n:
            self._commit(d.id, "ignored: a newer attempt exists", [])
            return
        if run.state in (RunState.CANCELLED, RunState.LOST) or (
            run.state == RunState.COMPLETED and category != "completed"
        ):
            self._commit(d.id, f"ignored: run is {run.state.value}", [])
            return
        if d.rule == UNRECOGNISED and "resume" not in d.action.split(","):
            excerpt = "\n".join(str(x) for x in d.evidence.get("lines") or ()) or None
            await self._unrecognised(run, attempt, d.id, d.reason, excerpt=excerpt)
            return
        spec = run.spec
        m = self._rebuild_match(run, spec, d)
        if m is None:
            why = f"rule {d.rule} is no longer loaded, so its decision cannot be carried out"
            await self._unrecognised(run, attempt, d.id, why, outcome=f"{why}; waiting for a human")
            return
        await self._act(run, attempt, m, spec, d.id)

    def _rebuild_match(self, run: RunRow, spec: JobSpec, d: DecisionRow) -> Match | None:
        """The match behind a recorded decision: the rule's actions from the run's rules, the rest stored."""
        try:
            rs = spec_ruleset(spec)
        except Exception as exc:
            log.error("the run's rules do not load; using the default rules", run_id=run.id, error=str(exc))
            rs = load_ruleset()
        if d.rule == UNRECOGNISED:  # the resume-once of an end no rule claimed: not a rule of the files
            state = JobState.from_slurm(str(d.evidence.get("state") or "FAILED"))
            lines = [str(x) for x in d.evidence.get("lines") or ()]
            return unrecognised_match(run.id, d.attempt or 0, state, d.reason, d.at, lines)
        cr = rs.by_name.get(d.rule)
        if cr is None:
            return None
        ev = d.evidence
        pol = ev.get("policy", {})
        return Match(
            rule=d.rule,
            run_id=run.id,
            attempt=d.attempt or 0,
            priority=cr.priority,
            category=str(pol.get("category", cr.rule.category)),
            actions=tuple(cr.rule.actions),
            evidence=Evidence(
                source=str(ev.get("source") or ""),
                first_line=int(ev.get("first_line") or 0),
                lines=tuple(str(x) for x in ev.get("lines") or ()),
                match_line=int(ev.get("match_line") or 0),
                state=ev.get("state"),
                metric=str(ev.get("metric") or ""),
                step=int(ev["step"]) if ev.get("step") is not None else None,
            ),
            signature=d.signature,
            reason=d.reason,
            node=ev.get("node"),
            retryable=bool(pol.get("retryable", True)),
            deterministic=bool(pol.get("deterministic", False)),
            max_retries=pol.get("max_retries"),
            same_signature_limit=pol.get("same_signature_limit"),
        )

    async def _carry_out(
        self,
        run: RunRow,
        attempt: AttemptRow,
        m: Match,
        spec: JobSpec,
        effects: Effects,
        stacks: StackSummary | None = None,
    ) -> str:
        """Carry out the plan decide/plan.py makes of the match; returns the outcome in words.

        People get one message per decision: the rule's message (the cause) with what was actually done
        appended (`announce`), so a budget that turned a resume into a give-up can never be announced as a
        resume.
        """
        if m.excludes_node:
            # Named once, before the policy decides: a fault pinned to an excluded node counts apart.
            # An address no node answers to stays as the evidence said it (the message shows it).
            node = await self._failing_node(m, attempt)
            m = replace(m, node=node) if node else m
        cfg = policy_config(spec)
        past = attempt_records(
            self.store.attempts(run.id),
            self.store.decisions(run.id),
            now=self.clock(),
            current=m,
            run_cap=cfg.max_retries,
        )
        lineage = attempt.overrides.get("checkpoint_dir")
        context = m.template_context(attempt.job_id or "", self._spec_context(spec))
        if any(a.alert is not None and "{best_checkpoint}" in a.alert.message for a in m.actions):
            context["best_checkpoint"] = self._best_checkpoint(spec)
        plan = plan_match(
            m,
            past,
            cfg,
            now=self.clock(),
            context=context,
            default_checkpoint=spec.resume.checkpoint,
            unfinished=unfinished(spec, lineage) if m.category == "completed" else None,
        )
        done: list[Done] = []
        for effect in plan.effects:
            if isinstance(effect, Resume):
                done.append(await self._resume(run, attempt, m, spec, effect))
            elif isinstance(effect, GiveUp):
                done.append(await self._give_up(run, attempt, effect.reason, m))
            elif isinstance(effect, Cancel):
                done.append(await self._cancel(run, attempt, m))
            elif isinstance(effect, Hold):
                done.append(await self._hold(run, attempt, m))
            elif isinstance(effect, Alert):
                done.append(Done("alerted", kind=effect.kind, level=effect.level))
            elif isinstance(effect, Complete):
                self.store.set_run_state(run.id, RunState.COMPLETED, reason="completed")
                self.plot(run, effects)
                self.timeline(run, effects)
        self._tell(run, m, plan.alert_text, done, effects, stacks)
        return "; ".join(d.outcome for d in done if d.outcome) or "recorded"

    def _tell(
        self,
        run: RunRow,
        m: Match,
        alert_text: str,
        done: list[Done],
        effects: Effects,
        stacks: StackSummary | None = None,
    ) -> None:
        """The decision's one message: a resume or give-up speaks for it; else the rule's alert, if any."""
        steering = [d for d in done if d.kind in ("resumed", "hop", "gave_up")]
        lead = steering[-1] if steering else next((d for d in done if d.kind), None)
        if lead is None:
            return  # a rule without an alert that only cancelled or held: recorded, nothing to say
        cause = alert_text or f"{run.id}: {m.rule}: {m.reason}"
        said = [d.said for d in done if d.said]
        title = cause if lead.kind == "completed" else announce(cause, said)
        fields = dict(lead.fields)
        text = lead.text
        if stacks is not None:  # where the hung processes were, taken before the cancel
            fields["stacks"] = stacks.headline()[:1000]
            text = f"{text}\nStacks: {stacks.text()[:1500]}".strip()
            if stacks.exclude_node:
                fields["exclude_node"] = stacks.exclude_node
        notice = Notice(
            run.id,
            lead.kind,
            title,
            text=text,
            level=lead.level,
            excerpt=None if lead.kind == "hop" else "\n".join(m.evidence.lines[-20:]) or None,
            rule=m.rule,
            needs_human=lead.kind == "gave_up" or lead.level == "error",
            fields=fields,
        )
        effects.append(partial(self.notify, notice))
        if lead.plot or m.evidence.metric:
            self.plot(run, effects, focus=m.evidence.metric or None)

    def _spec_context(self, spec: JobSpec) -> dict[str, str]:
        ctx = {"name": spec.name}
        if spec.shared_cache_dir is not None:
            ctx["shared_cache_dir"] = str(spec.shared_cache_dir)
        if spec.checkpoint is not None:
            ctx["checkpoint_dir"] = str(spec.checkpoint.dir)
        return ctx

    def _best_checkpoint(self, spec: JobSpec) -> str:
        """`step_40 (val:accuracy 0.91)`: the checkpoint a person would resume from after a regression."""
        if spec.checkpoint is None:
            return "none (the spec names no checkpoint dir)"
        ck = spec.checkpoint
        try:
            choice, _ = choose_in_dir(
                ck.dir,
                "best",
                metric=ck.metric,
                higher_is_better=ck.higher_is_better,
                keep_top_k=ck.keep_top_k,
            )
        except OSError as exc:
            return f"unknown ({exc})"
        cp = choice.checkpoint
        if cp is None:
            return "none yet"
        return cp.name + (f" ({ck.metric} {cp.metric:g})" if cp.metric is not None and ck.metric else "")

    async def _stop_job(self, attempt: AttemptRow) -> str:
        job = attempt.live_job
        if job is None:
            return ""
        try:
            await self.slurm.cancel(job)
        except SlurmError as exc:
            return f"scancel {job} failed: {exc}"
        return f"cancelled job {job}"

    async def _resume(self, run: RunRow, attempt: AttemptRow, m: Match, spec: JobSpec, plan: Resume) -> Done:
        prev = AttemptOverrides.from_dict(attempt.overrides)
        if plan.rollback and plan.before_step is None:
            # Decided on a log line (a NaN printed before the metrics were read): the metrics say where.
            plan = replace(plan, before_step=divergence_step(self._metric_points(run)))
        ckpt, why = resolve_checkpoint(
            spec,
            plan.selector,
            run_id=run.id,
            attempt=attempt.n + 1,
            lineage=prev.checkpoint_dir,
            before_step=plan.before_step,
        )
        if plan.before_step is not None and ckpt is None:
            # Without a checkpoint from before the divergence the trainer would resume from a bad one (or
            # its own newest): nothing safe to roll back to.
            reason = f"{m.rule} at step {plan.before_step}: cannot roll back ({why})"
            return await self._give_up(run, attempt, reason, m)
        exclude = set(prev.exclude)
        # A time limit or preemption that left a checkpoint to go on from is the chain working, not trouble.
        planned = m.category in FREE_CATEGORIES and ckpt is not None
        node = m.fault_node if plan.exclude_node else None  # resolved in _carry_out
        if node:
            exclude.add(node)
        overrides = AttemptOverrides(
            checkpoint=ckpt,
            checkpoint_dir=staging.trainer_dir(spec.checkpoint.dir, ckpt) if spec.checkpoint else None,
            env={**prev.env, **plan.env},
            # Mounts matter only inside a container (NeMo RL's launcher always has one).
            mounts=tuple(dict.fromkeys([*prev.mounts, *(plan.mounts if spec.container else ())])),
            sbatch_args=tuple(dict.fromkeys([*prev.sbatch_args, *plan.sbatch_args])),
            exclude=tuple(sorted(exclude)),
            reason=f"{m.rule}: {m.reason}",
            pinned=plan.before_step is not None or plan.selector != "latest",
            planned=planned,
        )
        at = max(plan.at, self.clock())
        delay = max(0.0, at - self.clock())
        changes = [f"{k}={v}" for k, v in plan.env.items()]
        changes += [f"mount {m}" for m in plan.mounts if spec.container]
        if node:
            changes.append(f"--exclude={node}")
        changes += list(plan.sbatch_args)
        what = f"resuming from {Path(ckpt).name}" if ckpt else f"resuming without a checkpoint ({why})"
        same_period = replace(overrides, save_period=prev.save_period)  # tuned only at a submission
        host_up = m.category != "node_failure"
        if host_up and node and plan.exclude_node and spec.resume.in_place and spec.slurm.spare_nodes:
            host_up = await self._host_up(node)
        kept = self._restart_in_place(
            run,
            attempt,
            spec,
            plan,
            same_period,
            planned=planned,
            delay=delay,
            node=node,
            m=m,
            host_up=host_up,
        )
        if kept is not None:
            detail = f"{what} {kept} in {delay:.0f}s; {plan.why}" + (
                f"; changed: {', '.join(changes)}" if changes else ""
            )
            return Done(
                detail,
                said=f"{resumed(ckpt, attempt.n + 1, delay, why)} {kept}",
                kind="resumed",
                text=f"{detail}. {why}",
                fields={
                    "checkpoint": ckpt or "-",
                    "attempt": str(attempt.n + 1),
                    "changes": ", ".join(changes) or "-",
                },
            )
        stopped = "" if plan.let_job_finish else await self._stop_job(attempt)
        detail = f"{what} in {delay:.0f}s; {plan.why}" + (
            f"; changed: {', '.join(changes)}" if changes else ""
        )
        self.scheduler.schedule(run.id, at=at, overrides=overrides, reason=f"{m.rule}: {detail}")
        return Done(
            "; ".join(x for x in (stopped, detail) if x),
            said=resumed(ckpt, attempt.n + 1, delay, why),
            kind="hop" if planned else "resumed",
            level="info" if planned else "warning",
            text="" if planned else f"{detail}. {why}",
            fields={
                "checkpoint": ckpt or "-",
                "attempt": str(attempt.n + 1),
                "changes": ", ".join(changes) or "-",
            },
        )

    async def _host_up(self, node: str) -> bool:
        """Whether Slurm says the failing node's host still runs (a spare can take its place only then):
        a GPU's fault line says the host was up when it printed it, not that it still is. Up when Slurm
        cannot be asked: the rule's own category said so, and the drain fails safe (the job ends)."""
        try:
            state = await self.slurm.node_state(node)
        except SlurmError as exc:
            log.warning("could not read the failing node's state", node=node, error=str(exc))
            return True
        if state is not None and host_down(state):
            log.info("the failing node's host is down in Slurm", node=node, state=state)
            return False
        return True

    def _restart_in_place(
        self,
        run: RunRow,
        attempt: AttemptRow,
        spec: JobSpec,
        plan: Resume,
        overrides: AttemptOverrides,
        *,
        planned: bool,
        delay: float,
        node: str | None = None,
        m: Match | None = None,
        host_up: bool = True,
    ) -> str | None:
        """Attempt n+1 as the next driver run inside attempt n's running job, its word given to the job's
        runner under the store's transaction (decide/inplace.py says when); returns what was done in words,
        or None when the resume goes through Slurm as before (the reason is logged). A fault pinned to
        `node` that a spare takes drains it out of the job's Ray cluster first (the runner's pre-K.sh)."""
        if not spec.resume.in_place or not attempt.overrides.get("runner"):
            return None
        fresh = self.store.get_attempt(run.id, attempt.n) or attempt
        job = fresh.job_id
        base, _ = attempt_log_base(spec, self.settings.runs_dir / run.id, attempt.overrides)
        origin = int(attempt.overrides.get("origin") or attempt.n)
        d = job_runner_dir(base, attempt_key(run.id, attempt.n, attempt.overrides)) if job else None
        # The job runs while its runner does (it has not written `ended`): Slurm's state, read at the last
        # poll, may still say PENDING for a driver that crashed within seconds.
        running = (
            fresh.state == AttemptState.SUBMITTED
            and not JobState.from_slurm(fresh.slurm_state or "PENDING").is_terminal
            and d is not None
            and not (d / ENDED_NAME).exists()
        )
        drained = [str(x) for x in attempt.overrides.get("drained") or ()]
        spare = spare_for(
            node,
            head_node=first_node(fresh.nodes),
            host_up=host_up,
            spare_nodes=spec.slurm.spare_nodes,
            drained=drained,
        )
        why = in_place_refusal(
            plan,
            job_running=running,
            planned=planned,
            container=spec.container is not None,
            spare_left=spare.spare_left,
            head_node=spare.head_node,
            host_up=spare.host_up,
            delay_s=delay,
            wait_s=spec.resume.in_place_wait_s,
        )
        latest = self.store.latest_attempt(run.id)
        if why is None and overrides.pinned:
            why = "a chosen checkpoint is staged at submission"
        if why is None and latest is not None and latest.n != attempt.n:
            why = "a newer attempt exists"
        if why is not None or d is None or job is None:
            log.info("resuming through Slurm, not in place", run_id=run.id, attempt=attempt.n, why=why)
            return None
        k = driver_run_in(d, int(attempt.overrides.get("driver_run") or 1))
        n = attempt.n + 1
        report = read_exit(d, k)
        record = {
            **overrides.to_dict(),
            "runner": True,
            "driver_run": k + 1,
            "origin": origin,
            **({BY_RUN: True} if attempt.overrides.get(BY_RUN) else {}),
            "ckpt_step_at_submit": newest_checkpoint_step(spec, overrides.checkpoint_dir),
        }
        pre = None
        if spare.drain is not None:
            record["drained"] = [*drained, spare.drain]
            pre = drain_script(spare.drain, f"shepherd: {m.rule if m else 'fault'} on {spare.drain}")
        env = {**overrides.env, "SHEPHERD_ATTEMPT": str(n)}
        if overrides.checkpoint:
            env["SHEPHERD_RESUME_FROM"] = overrides.checkpoint
        if overrides.checkpoint_dir:
            env["SHEPHERD_CHECKPOINT_DIR"] = overrides.checkpoint_dir
        script = run_script(as_argv(driver_command(spec, overrides)), env)
        said = f"in place: driver run {k + 1} of Slurm job {job}, no sbatch" + (
            f", {spare.drain} drained from its Ray cluster (a spare node takes its place)" if pre else ""
        )
        try:
            self.store.restart_in_place(
                fresh,
                in_place_tag(run.id, n, origin),
                record,
                exit_code=report.code if report else None,
                ended_at=report.at if report else None,
                message=f"attempt {n} restarted {said}",
                give_word=lambda n: give_run(d, k, attempt=n, script=script, delay_s=delay, pre=pre),
            )
        except (WordTaken, OSError) as exc:
            log.warning("could not restart in place; resuming through Slurm", run_id=run.id, error=str(exc))
            return None
        return said

    async def _give_up(self, run: RunRow, attempt: AttemptRow, reason: str, m: Match) -> Done:
        stopped = await self._stop_job(attempt)
        self.store.set_run_state(
            run.id,
            RunState.GAVE_UP,
            reason=reason,
            event=("gave-up", reason, {"rule": m.rule}),
            attempt=attempt.n,
        )
        return Done(
            "; ".join(x for x in (stopped, f"gave up: {reason}") if x),
            said=gave_up(reason),
            kind="gave_up",
            level="error",
            text=reason,
            plot=True,
        )

    async def _cancel(self, run: RunRow, attempt: AttemptRow, m: Match) -> Done:
        stopped = await self._stop_job(attempt)
        self.store.set_run_state(
            run.id,
            RunState.CANCELLED,
            reason=f"cancelled by rule {m.rule}",
            event=("cancelled", f"cancelled by rule {m.rule}", {}),
            attempt=attempt.n,
        )
        return Done(stopped or "cancelled", said=cancelled(attempt.live_job))

    async def _hold(self, run: RunRow, attempt: AttemptRow, m: Match) -> Done:
        if attempt.job_id and attempt.slurm_state == "PENDING":
            try:
                await self.slurm.hold(attempt.job_id)
            except SlurmUnavailable as exc:
                self.holds_owed[run.id] = (attempt.n, attempt.job_id, m.rule)
                why = f"Slurm unreachable, the hold is retried once it answers ({exc})"
                return Done(f"hold not done yet: {why}", said=not_held(why))
            except SlurmError as exc:
                return Done(f"hold failed: {exc}", said=not_held(f"scontrol hold failed: {exc}"))
            self._mark_held(run.id, attempt.n, f"held by rule {m.rule}")
            return Done(f"held job {attempt.job_id}", said=held(attempt.job_id))
        return Done("hold skipped: the job is not pending", said=not_held("the job is not pending"))

    def _mark_held(self, run_id: str, n: int, why: str) -> None:
        self.store.set_run_state(run_id, RunState.HELD, held=True, event=("held", why, {}), attempt=n)

    async def retry_owed_holds(self) -> None:
        """Holds a rule decided while Slurm was unreachable, asked again (the daemon calls this after a poll
        that reached Slurm); dropped once done, refused, or moot (the run ended, the job no longer pends)."""
        for run_id, (n, job, rule) in list(self.holds_owed.items()):
            run, attempt = self.store.get_run(run_id), self.store.get_attempt(run_id, n)
            if run is None or run.state.is_final or attempt is None or attempt.job_id != job:
                del self.holds_owed[run_id]
                continue
            if attempt.slurm_state != "PENDING":
                del self.holds_owed[run_id]
                self.store.add_event(
                    run_id, n, "hold-dropped", f"hold by rule {rule} dropped: the job is no longer pending"
                )
                continue
            try:
                await self.slurm.hold(job)
            except SlurmUnavailable:
                continue  # still unreachable: next time
            except SlurmError as exc:
                del self.holds_owed[run_id]
                self.store.add_event(run_id, n, "hold-failed", f"hold by rule {rule} failed: {exc}")
                continue
            del self.holds_owed[run_id]
            self._mark_held(run_id, n, f"held by rule {rule} (asked again once Slurm answered)")

    async def _failing_node(self, m: Match, attempt: AttemptRow) -> str | None:
        """The node to exclude: named by the evidence, else the job's only node (asking Slurm if need be),
        else the node Slurm says has the evidence's address (Ray names workers by IP); None when nothing
        tells, since `--exclude` refuses the whole submission for a name that is no node."""
        if m.node and not looks_like_ip(m.node):
            return m.node
        nodes = (self.store.get_attempt(attempt.run_id, attempt.n) or attempt).nodes or ""
        if not nodes and attempt.job_id:
            try:
                nodes = await self.slurm.job_nodes(attempt.job_id)
            except SlurmError as exc:
                log.warning("could not ask Slurm for the job's nodes", job_id=attempt.job_id, error=str(exc))
        if nodes and "," not in nodes and "[" not in nodes:
            return nodes
        if m.node and nodes:
            try:
                return await self.slurm.node_at(m.node, nodes)
            except SlurmError as exc:
                log.warning("could not ask Slurm which node has an address", address=m.node, error=str(exc))
        return None

    def decided(self, run_id: str, n: int) -> bool:
        """Whether a decision that changes the run's course exists for attempt n (the runner's answer waits
        for none)."""
        return self._decided(run_id, n)

    def carried_out(self, run_id: str, n: int) -> bool:
        """Whether every decision that changes the course of attempt n has been carried out (its outcome
        recorded): a restart in place has then given the runner its word, or the resume went through Slurm."""
        steering = ("resume", "give_up", "cancel", "hold")
        return all(
            d.outcome
            for d in self.store.decisions(run_id)
            if d.attempt == n and any(a in d.action.split(",") for a in steering)
        )

    def _decided(self, run_id: str, n: int) -> bool:
        """Whether a decision that changes the run's course (not a mere alert) exists for attempt n."""
        steering = ("resume", "give_up", "cancel", "hold")
        return any(
            d.attempt == n and any(a in d.action.split(",") for a in steering)
            for d in self.store.decisions(run_id)
        )

    async def on_unmatched_end(
        self,
        run: RunRow,
        attempt: AttemptRow,
        state: JobState,
        exit_code: int | None,
        signal: int | None = None,
    ) -> None:
        """An attempt ended and no rule claimed it: completed is done; anything else waits for a human."""
        run = self.store.get_run(run.id) or run
        if run.state.is_final or run.state.next_attempt_pending:
            return
        if attempt.n != (self.store.latest_attempt(run.id) or attempt).n:
            return
        if self._decided(run.id, attempt.n):
            return  # a rule already decided this attempt's fate (perhaps still carrying it out)
        if state == JobState.COMPLETED:
            self.store.set_run_state(run.id, RunState.COMPLETED, reason="completed")
            self.notify(Notice(run.id, "completed", f"{run.id} completed", level="info"))
            plots: Effects = []
            self.plot(run, plots)
            self.timeline(run, plots)
            for effect in plots:
                effect()
            return
        code = f" ({describe_exit(exit_code, signal)})" if exit_code is not None else ""
        reason = f"attempt {attempt.n} ended {state.value}{code} and no rule recognised the failure"
        decisive = await self._decisive(run, attempt)
        lines = [f"{d.where()}: {d.text}" for d in decisive]
        resume = self._unrecognised_resume(run, attempt, state, reason, lines)
        if resume is not None:
            await self.on_match(run, attempt, resume)
            return
        decision_id = self.store.record_decision(
            run.id,
            attempt.n,
            rule=UNRECOGNISED,
            action="alert",
            signature=f"unrecognised:{state.value}",
            reason=reason,
            evidence={
                "state": state.value,
                "exit_code": exit_code,
                "signal": signal,
                "lines": lines,
                "decisive": [d.as_dict() for d in decisive],
            },
        )
        if decision_id is None:
            return
        crash_point("after-decision")
        await self._unrecognised(run, attempt, decision_id, reason, excerpt="\n".join(lines) or None)

    async def on_driver_failed(self, run: RunRow, attempt: AttemptRow, code: int) -> bool:
        """A driver run under the job's runner exited non-zero, no rule claimed it, and the runner waits for
        Shepherd's word: the resume-once an unrecognised end gets (decide/plan.py), decided now so that it
        restarts in place; False when the policy leaves it to a human (the job is then told to end, and its
        FAILED end goes through `on_unmatched_end` as any other)."""
        run = self.store.get_run(run.id) or run
        if run.state.is_final or run.state.next_attempt_pending:
            return False
        if attempt.n != (self.store.latest_attempt(run.id) or attempt).n:
            return False
        if self._decided(run.id, attempt.n):
            return True
        if not run.spec.resume.unrecognised_after_progress or run.spec.checkpoint is None:
            return False  # nothing to resume: no need to read the logs' decisive lines
        reason = (
            f"attempt {attempt.n}'s driver exited ({describe_exit(code, None)}) while its job runs, and no "
            "rule recognised the failure"
        )
        decisive = await self._decisive(run, attempt)
        lines = [f"{d.where()}: {d.text}" for d in decisive]
        resume = self._unrecognised_resume(run, attempt, JobState.FAILED, reason, lines)
        if resume is None:
            return False
        await self.on_match(run, attempt, resume)
        return True

    async def _decisive(self, run: RunRow, attempt: AttemptRow) -> list[DecisiveLine]:
        """The decisive lines of the attempt's logs (act/decisive.py), read off the event loop; none when
        they cannot be read (the decision is taken all the same)."""
        try:
            return await anyio.to_thread.run_sync(decisive_lines, self.settings.runs_dir, run, attempt)
        except Exception:
            log.exception("could not read the attempt's decisive lines", run_id=run.id, attempt=attempt.n)
            return []

    def _unrecognised_resume(
        self, run: RunRow, attempt: AttemptRow, state: JobState, reason: str, lines: list[str]
    ) -> Match | None:
        """The resume-once match for an end no rule claimed, when the spec allows it and the attempt made
        progress first: a new checkpoint, or steps past its start (decide/plan.py says when)."""
        spec = run.spec
        if not spec.resume.unrecognised_after_progress or spec.checkpoint is None:
            return None
        before = attempt.overrides.get("ckpt_step_at_submit")
        mark = self.store.latest_step(run.id)
        return unrecognised_resume(
            run.id,
            attempt.n,
            state,
            reason,
            step_before=int(before) if before is not None else None,
            step_after=newest_checkpoint_step(spec, attempt.overrides.get("checkpoint_dir")),
            at=self.clock(),
            lines=lines,
            trained_to=mark.step if mark is not None and mark.attempt == attempt.n else None,
        )

    async def _unrecognised(
        self,
        run: RunRow,
        attempt: AttemptRow,
        decision_id: int,
        reason: str,
        outcome: str = "alerted; waiting for a human (`shepherd resume`)",
        excerpt: str | None = None,
    ) -> None:
        """Stop and wait for a human: the run FAILED, then the alert (with the logs' decisive lines) and the
        outcome together."""
        run = self.store.get_run(run.id) or run
        if not run.state.is_final and not run.state.next_attempt_pending:
            self.store.set_run_state(
                run.id, RunState.FAILED, reason=reason, event=("failed", reason, {}), attempt=attempt.n
            )
        alert = Notice(
            run.id, "alert", f"{run.id}: {reason}", level="error", excerpt=excerpt, needs_human=True
        )
        self._commit(decision_id, outcome, [lambda: self.notify(alert)])
