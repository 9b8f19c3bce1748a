"""Wiring: one anyio task group running the daemon's loops.

Loops: the queue watcher (claims specs), the scheduler (submits first attempts
and due resumes), the Slurm poller (one squeue per poll for every run), plus
whatever observers are attached (log/metric watchers, Slack). Start-up
reconciles every unfinished intent with Slurm before anything is submitted.
"""

from __future__ import annotations

import json
import signal
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import structlog
from anyio.abc import TaskGroup

if TYPE_CHECKING:
    from supervisor.act.actions import Actions

from supervisor.domain.jobstate import JobState
from supervisor.domain.notices import RunEvent
from supervisor.domain.observations import StateEvent
from supervisor.domain.overrides import AttemptOverrides
from supervisor.domain.runs import AttemptRow, AttemptState, RunRow, RunState
from supervisor.domain.spec import JobSpec
from supervisor.faultpoints import crash_point
from supervisor.intake.queue import Intake, queue_dir_problem
from supervisor.notify.sinks import LogSink
from supervisor.ports import EventSink
from supervisor.service.sdnotify import Notifier
from supervisor.service.watchdog import (
    HeartbeatRegistry,
    StatusSummary,
    Watchdog,
    format_duration,
    format_status,
)
from supervisor.settings import Settings
from supervisor.slurm.client import SlurmClient, SlurmError, SlurmRejected, SlurmUnavailable
from supervisor.slurm.parse import JobObservation, make_job_name
from supervisor.slurm.reconcile import UpdateKind, reconcile, sacct_needed
from supervisor.slurm.submit import build_submit_request
from supervisor.store import Store

log = structlog.get_logger(__name__)

DAEMON_THREAD = "shepherd-daemon"  # the Slack thread for the daemon's own health, not a run's
StateHandler = Callable[[RunRow, AttemptRow, StateEvent], Awaitable[None]]
OWED_EXIT_CODE_MAX_AGE_S = 86400.0  # stop asking sacct for an exit code after a day


class Daemon:
    def __init__(
        self,
        settings: Settings,
        store: Store,
        slurm: SlurmClient,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.store = store
        self.slurm = slurm
        self.clock = clock
        self.intake = Intake(
            settings.queue_dir,
            settings.runs_dir,
            settings.rejected_dir,
            max_bytes=settings.max_spec_bytes,
            settle_s=settings.spec_settle_s,
            clock=clock,
        )
        self.in_flight: set[tuple[str, int]] = set()
        # Every attempt in flight at any moment of the current poll: its squeue/sacct snapshot may predate
        # the job, so the poll must conclude nothing about it (else: "never submitted" -> submitted twice).
        self._flown: set[tuple[str, int]] = set()
        self.blind_since: float | None = None
        self._blind_alerted = False
        # sacct (slurmdbd) can be down while squeue answers: ends are settled from squeue, and their exit
        # codes are asked for again until sacct has them (see exit_codes_owed).
        self.accounting_down_since: float | None = None
        self.last_poll_ok: float | None = None
        self.ready = anyio.Event()
        self.state_handlers: list[StateHandler] = []
        self.actions: Actions | None = None
        self.sink: EventSink = LogSink()
        self.sd = Notifier()
        self.heartbeats = HeartbeatRegistry()
        slow = settings.slurm
        # How long each loop may stay silent before the watchdog calls it wedged.
        self.loop_allowance = {
            "intake": 60.0,
            "scheduler": 60.0 + 2 * slow.command_timeout_s,
            "poller": max(slow.idle_poll_interval_s, slow.steady_poll_interval_s)
            + 4 * slow.command_timeout_s
            + 30,
        }
        self._wake_scheduler = anyio.Event()
        self._wake_poller = anyio.Event()
        self._tg: TaskGroup | None = None
        self.python_bin_dir = settings.python.parent if settings.python else Path(sys.executable).parent

    # ---- lifecycle ------------------------------------------------------------------------------------
    async def run(self, *, extra_tasks: list[Callable[[], Coroutine[Any, Any, None]]] | None = None) -> None:
        self.settings.ensure_dirs()
        problem = queue_dir_problem(self.settings.queue_dir)
        if problem is not None:
            log.error("refusing to start: the queue folder is not private to the daemon", problem=problem)
            raise SystemExit(f"shepherd: refusing to start: {problem}")
        self.adopt_orphans()
        async with anyio.create_task_group() as tg:
            self._tg = tg
            tg.start_soon(self._signals, tg)
            # READY=1 only once state is loaded and every intent is reconciled with Slurm.
            await self.reconcile_until_seen()
            await self.settle_after_restart()
            self.ready.set()
            self.sd.ready(self.status_line())
            log.info(
                "daemon ready",
                root=str(self.settings.root),
                runs=len(self.store.list_runs(include_final=False)),
            )
            for name, allowance in self.loop_allowance.items():
                self.heartbeats.register(name, allowance)
            tg.start_soon(self.intake_loop)
            tg.start_soon(self.scheduler_loop)
            tg.start_soon(self.poll_loop)
            tg.start_soon(Watchdog(self.heartbeats, self.sd, status=self.status_summary_for_systemd).run)
            for task in extra_tasks or []:
                tg.start_soon(task)

    async def _signals(self, tg: TaskGroup) -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for signum in signals:
                log.info("stopping", signal=signal.Signals(signum).name)
                self.sd.stopping()
                tg.cancel_scope.cancel()
                return

    def beat(self, loop: str) -> None:
        if loop in self.heartbeats.names:
            self.heartbeats.beat(loop)

    def status_summary_for_systemd(self) -> StatusSummary:
        runs = self.store.list_runs(include_final=False)
        active = sum(1 for r in runs if r.state == RunState.RUNNING)
        pending = sum(
            1
            for r in runs
            if r.state
            in (RunState.PENDING, RunState.QUEUED, RunState.SUBMITTING, RunState.BACKOFF, RunState.HELD)
        )
        failed = sum(1 for r in self.store.list_runs() if r.state in (RunState.FAILED, RunState.LOST))
        blind = self.clock() - self.blind_since if self.blind_since is not None else None
        notes: tuple[str, ...] = ()
        if self.accounting_down_since is not None:
            down_for = format_duration(self.clock() - self.accounting_down_since)
            notes = (f"accounting: sacct unavailable for {down_for}, exit codes wait",)
        return StatusSummary(active=active, pending=pending, failed=failed, blind_for_s=blind, notes=notes)

    @property
    def exit_codes_owed(self) -> dict[tuple[str, int], str]:
        """Job id by attempt, for ended attempts whose exit code sacct has not given yet. The store is the
        only record (an ended attempt without an exit code), so a restart goes on asking; for a day."""
        since = self.clock() - OWED_EXIT_CODE_MAX_AGE_S
        return {(a.run_id, a.n): a.job_id or "" for a in self.store.ended_without_exit_code(since)}

    def status_line(self) -> str:
        return format_status(self.status_summary_for_systemd())

    def adopt_orphans(self) -> None:
        """A crash between claiming a spec (rename) and recording the run leaves a run dir with no row."""
        from supervisor.domain.spec import load_spec
        from supervisor.domain.yamlpos import YamlDocumentError

        known = {r.id for r in self.store.list_runs()}
        for run_dir in sorted(self.settings.runs_dir.glob("*/spec.yaml")):
            run_id = run_dir.parent.name
            if run_id in known:
                continue
            try:
                spec = load_spec(run_dir)
            except YamlDocumentError as exc:
                log.error("orphan run dir holds an invalid spec", run_id=run_id, error=str(exc))
                continue
            self.store.create_run(run_id, spec.name, spec.model_dump_json(), str(run_dir))
            log.warning("adopted a claimed spec after a crash", run_id=run_id)

    async def reconcile_until_seen(self) -> None:
        """Before READY: one successful look at Slurm, so intents are settled before anything is submitted."""
        delay = 1.0
        while True:
            if await self.poll_once():
                return
            log.warning("slurm not reachable at start-up; retrying", retry_in_s=delay)
            self.sd.extend_timeout(delay + 2 * self.settings.slurm.command_timeout_s)
            self.sd.status(f"starting: waiting for slurm ({self.status_line()})")
            await anyio.sleep(delay)
            delay = min(delay * 2, self.settings.slurm.poll_interval_s)

    async def settle_after_restart(self) -> None:
        """Finish what a SIGKILL interrupted, before anything new is submitted.

        A decision recorded but not carried out is carried out (Actions.finish_unfinished). An attempt whose
        end was recorded but never handled (killed between the two) gets its terminal state event again, so
        the rules see it; a vanished attempt whose run was not yet marked LOST is marked now.
        """
        if self.actions is not None:
            await self.actions.finish_unfinished()
        for run in self.store.list_runs(include_final=False):
            if run.state in (RunState.BACKOFF, RunState.QUEUED, RunState.SUBMITTING, RunState.HELD):
                continue
            last = self.store.latest_attempt(run.id)
            if last is None:
                continue
            if last.state == AttemptState.UNKNOWN:
                msg = last.reason or "the job vanished from Slurm"
                self.store.set_run_state(
                    run.id, RunState.LOST, reason=msg, event=("lost", msg, {}), attempt=last.n
                )
            elif last.state == AttemptState.ENDED:
                log.warning("an ended attempt was never handled; handling it now", run_id=run.id, n=last.n)
                try:
                    state = JobState(last.slurm_state or "")
                except ValueError:
                    state = JobState.FAILED
                ev = StateEvent(
                    run.id,
                    last.n,
                    last.job_id or "",
                    state,
                    last.reason or "",
                    last.exit_code,
                    None,
                    last.nodes or "",
                    at=self.clock(),
                )
                await self._emit(run.id, last.n, ev)

    # ---- queue -----------------------------------------------------------------------------------------
    async def intake_loop(self) -> None:
        import watchfiles

        queue = self.settings.queue_dir
        self.scan_queue()
        stop = anyio.Event()
        while True:
            try:
                async for _changes in watchfiles.awatch(
                    queue,
                    stop_event=stop,
                    debounce=50,
                    step=20,
                    rust_timeout=int(self.settings.spec_settle_s * 1000) + 500,
                    yield_on_timeout=True,
                    force_polling=self.settings.watch.force_polling,
                    poll_delay_ms=int(self.settings.watch.poll_interval_s * 1000),
                ):
                    self.beat("intake")
                    self.scan_queue()
            except Exception as exc:  # watcher broke (dir removed...): rescan by polling and retry
                log.error("queue watcher failed; retrying", error=str(exc))
                self.settings.ensure_dirs()
                await anyio.sleep(1)

    def scan_queue(self) -> None:
        claimed, _rejected = self.intake.scan()
        for c in claimed:
            self.store.create_run(c.run_id, c.spec.name, c.spec.model_dump_json(), str(c.spec_path))
        if claimed:
            self._wake_scheduler.set()

    # ---- submission ------------------------------------------------------------------------------------
    async def scheduler_loop(self) -> None:
        last_adopt = self.clock()
        while True:
            self.beat("scheduler")
            try:
                wait = await self.schedule_once()
                if self.clock() - last_adopt > 60:
                    self.adopt_orphans()  # a claim whose row could not be written (disk full, locked)
                    last_adopt = self.clock()
            except Exception:  # the store is full or locked, say: say so, keep going, retry
                log.exception("scheduling failed; retrying")
                wait = 5.0
            with anyio.move_on_after(wait):
                await self._wake_scheduler.wait()
            self._wake_scheduler = anyio.Event()

    async def schedule_once(self) -> float:
        """Submit every due run; returns how long until the next one is due (at most 5 s)."""
        now = self.clock()
        wait = 5.0
        for run in self.store.list_runs(include_final=False):
            due = run.state == RunState.QUEUED or (
                run.state == RunState.BACKOFF and (run.next_action_at or 0) <= now
            )
            if due and not run.held and not self._previous_attempt_alive(run):
                await self.submit_attempt(run)
            elif run.state == RunState.BACKOFF and run.next_action_at:
                wait = min(wait, max(0.05, run.next_action_at - now))
        return wait

    def _previous_attempt_alive(self, run: RunRow) -> bool:
        """A resume waits until Slurm confirms the previous job is gone (we may have just scancelled it)."""
        last = self.store.latest_attempt(run.id)
        if last is None or last.state not in (AttemptState.INTENT, AttemptState.SUBMITTED):
            return False
        # COMPLETING: the batch script is gone and only cleanup remains; the next attempt may queue behind it.
        return last.slurm_state != JobState.COMPLETING.value

    def spec_of(self, run: RunRow) -> JobSpec:
        return JobSpec.model_validate_json(run.spec_json)

    def run_dir(self, run: RunRow) -> Path:
        return self.settings.runs_dir / run.id

    async def submit_attempt(self, run: RunRow) -> AttemptRow | None:
        spec = self.spec_of(run)
        overrides = AttemptOverrides.from_dict(run.next_attempt)
        from supervisor.act.actions import newest_checkpoint_step

        # What existed at submission: the policy's measure of whether this attempt made progress.
        record = {**overrides.to_dict(), "ckpt_step_at_submit": newest_checkpoint_step(spec)}
        attempt = self.store.begin_attempt(run.id, lambda n: make_job_name(run.id, n), record)
        crash_point("after-intent")
        req = build_submit_request(
            spec,
            run_id=run.id,
            attempt=attempt.n,
            run_dir=self.run_dir(run),
            overrides=overrides,
            python_bin_dir=self.python_bin_dir,
            script=self.settings.launch_script,
        )
        Path(req.env["BASE_LOG_DIR"]).mkdir(parents=True, exist_ok=True)
        key = (run.id, attempt.n)
        self.in_flight.add(key)
        self._flown.add(key)
        try:
            job_id = await self.slurm.submit(req)
        except SlurmRejected as exc:
            self.store.attempt_not_submitted(run.id, attempt.n, AttemptState.SUBMIT_FAILED, str(exc))
            self.store.set_run_state(
                run.id,
                RunState.FAILED,
                reason=f"sbatch refused the job: {exc}",
                event=("failed", f"sbatch refused attempt {attempt.n}: {exc}", {}),
                attempt=attempt.n,
            )
            log.error("sbatch refused the job", run_id=run.id, attempt=attempt.n, error=str(exc))
            return None
        except SlurmUnavailable as exc:
            # The job may or may not exist: the poller settles the intent by its tag.
            log.warning("sbatch outcome unknown; will reconcile by tag", run_id=run.id, error=str(exc))
            self._wake_poller.set()
            return None
        finally:
            self.in_flight.discard(key)
        crash_point("after-sbatch")
        self.store.attempt_submitted(run.id, attempt.n, job_id)
        log.info("submitted", run_id=run.id, attempt=attempt.n, job_id=job_id)
        self._announce_submission(run, spec, attempt.n, job_id, req.env["BASE_LOG_DIR"])
        self._wake_poller.set()
        return self.store.get_attempt(run.id, attempt.n)

    def wake(self) -> None:
        """Something changed outside the loops (a command): look at the runs now."""
        self._wake_scheduler.set()
        self._wake_poller.set()

    def _announce_submission(self, run: RunRow, spec: JobSpec, n: int, job_id: str, log_dir: str) -> None:
        s = spec.slurm
        summary = (
            f"{s.nodes} node(s) x {s.gpus_per_node} GPU, {s.cpus} CPUs"
            + (f", partition {s.partition}" if s.partition else "")
            + (f", time {s.time}" if s.time else "")
        )
        logs = "\n".join([f"{log_dir}/{job_id}-logs/ray-driver.log", f"{log_dir}/slurm-{job_id}.out"])
        if n == 1:
            self.sink.publish(
                RunEvent(
                    run.id,
                    "opened",
                    f"{run.name} submitted",
                    fields={"name": run.name, "summary": summary, "job_id": job_id, "logs": logs},
                )
            )
        else:
            self.sink.publish(
                RunEvent(
                    run.id,
                    "submitted",
                    f"attempt {n} submitted as Slurm job {job_id}",
                    text=AttemptOverrides.from_dict(run.next_attempt).reason,
                )
            )

    # ---- Slurm polling ----------------------------------------------------------------------------------
    def poll_interval(self) -> float:
        """Fast while something is starting or changing, slow when every run is steady, slower when idle."""
        s = self.settings.slurm
        runs = self.store.list_runs(include_final=False)
        if not runs:
            return s.idle_poll_interval_s
        if self.blind_since is not None:
            return s.poll_interval_s
        for r in runs:
            if r.state not in (RunState.RUNNING, RunState.PENDING, RunState.HELD, RunState.BACKOFF):
                return s.poll_interval_s
            a = self.store.latest_attempt(r.id)
            if a is None or (a.started_at is None and r.state == RunState.RUNNING):
                return s.poll_interval_s
            if r.state == RunState.RUNNING and a.started_at and self.clock() - a.started_at < 120:
                return s.poll_interval_s
            if r.state == RunState.PENDING and a.submitted_at and self.clock() - a.submitted_at < 60:
                return s.poll_interval_s
        return s.steady_poll_interval_s

    async def poll_loop(self) -> None:
        failures = 0
        while True:
            self.beat("poller")
            try:
                seen = await self.poll_once()
                # Slurm not answering: back off (doubling, up to the steady cadence) so a struggling
                # controller is not hammered; the first success returns to the normal cadence.
                failures = 0 if seen else failures + 1
                interval = self.poll_interval()
                if failures:
                    s = self.settings.slurm
                    interval = min(
                        s.poll_interval_s * 2 ** (failures - 1),
                        max(s.steady_poll_interval_s, s.poll_interval_s),
                    )
            except Exception:  # a store error must not end supervision: say so and look again soon
                log.exception("poll failed; retrying")
                interval = self.settings.slurm.poll_interval_s
            with anyio.move_on_after(interval):
                await self._wake_poller.wait()
                await anyio.sleep(0.2)  # let a burst of submissions land in one poll
            self._wake_poller = anyio.Event()

    async def poll_once(self) -> bool:
        """One look at Slurm for every open attempt; False if Slurm could not be asked."""
        self._flown = set(self.in_flight)
        open_attempts = self.store.open_attempts()
        owed = self.exit_codes_owed
        if not open_attempts and not owed and not self.store.list_runs(include_final=False):
            return True
        try:
            squeue = await self.slurm.squeue()
        except SlurmError as exc:
            self._went_blind(str(exc))
            return False
        sacct: list[JobObservation] | None = None
        ids = sacct_needed(open_attempts, squeue) + list(owed.values())
        seen_tags = {o.tag for o in squeue if o.tag}
        lost_intents = [
            a.tag
            for a in open_attempts
            if a.state == AttemptState.INTENT
            and (a.run_id, a.n) not in seen_tags
            and (a.run_id, a.n) not in self.in_flight | self._flown
        ]
        try:
            sacct = await self.slurm.sacct(ids, names=lost_intents) if (ids or lost_intents) else []
        except SlurmError as exc:
            self._accounting_unavailable(str(exc))
            sacct = None
        else:
            if ids or lost_intents:
                self._accounting_restored()
            self._record_owed_exit_codes(sacct, owed)
        self._sight_restored()
        updates = reconcile(
            open_attempts,
            squeue,
            sacct,
            now=self.clock(),
            grace_s=self.settings.slurm.unknown_grace_s,
            in_flight=frozenset(self.in_flight | self._flown),
        )
        for u in updates:
            await self._apply(u.run_id, u.n, u.kind, u.obs, u.missing_since)
        return True

    def _went_blind(self, error: str) -> None:
        now = self.clock()
        if self.blind_since is None:
            self.blind_since = now
            log.warning("cannot see slurm; taking no action until it answers", error=error)
        after = self.settings.slurm.blind_alert_after_s
        if not self._blind_alerted and now - self.blind_since >= after:
            self._blind_alerted = True
            self.sink.publish(
                RunEvent(
                    DAEMON_THREAD,
                    "alert",
                    f"shepherd cannot see Slurm for {int(now - self.blind_since)} s",
                    text=f"Last error: {error}. No run is marked failed or resumed while blind; "
                    "tracking resumes when Slurm answers.",
                    level="error",
                    needs_human=True,
                    fields={"name": "shepherd daemon"},
                )
            )

    def _accounting_unavailable(self, error: str) -> None:
        """sacct failed while squeue answers (slurmdbd down, say): say so once per outage."""
        if self.accounting_down_since is None:
            self.accounting_down_since = self.clock()
            log.warning(
                "slurm accounting (sacct) unavailable: jobs are tracked with squeue alone, nothing is"
                " concluded from a job's absence, exit codes are recorded when sacct answers again",
                error=error,
            )
        else:
            log.debug("sacct still unavailable", error=error)

    def _accounting_restored(self) -> None:
        if self.accounting_down_since is not None:
            down_for = self.clock() - self.accounting_down_since
            log.info("slurm accounting (sacct) answers again", down_for_s=round(down_for, 1))
            self.accounting_down_since = None

    def _record_owed_exit_codes(self, sacct: list[JobObservation], owed: dict[tuple[str, int], str]) -> None:
        """Exit codes of attempts that ended while sacct could not tell them, now that it can."""
        for obs in sacct:
            key = obs.tag
            if key is None or owed.get(key) != obs.job_id:
                continue
            if not obs.state.is_terminal or obs.exit_code is None:
                continue  # sacct lags: slurmctld has not sent it the job's end yet
            attempt = self.store.get_attempt(*key)
            if attempt is None or attempt.exit_code is not None:
                continue
            self.store.observe_attempt(
                key[0],
                key[1],
                slurm_state=attempt.slurm_state or obs.state.value,
                reason=attempt.reason,
                nodes=obs.nodes,
                exit_code=obs.exit_code,
            )
            msg = (
                f"attempt {key[1]} exit code {obs.exit_code}"
                + (f" (signal {obs.signal})" if obs.signal else "")
                + f", state {obs.state.value}: recorded from sacct once accounting answered"
            )
            self.store.add_event(
                key[0],
                key[1],
                "exit-code",
                msg,
                {"state": obs.state.value, "exit_code": obs.exit_code, "signal": obs.signal},
            )
            log.info("exit code recorded late", run_id=key[0], attempt=key[1], exit_code=obs.exit_code)

    def _sight_restored(self) -> None:
        if self.blind_since is not None:
            blind_for = self.clock() - self.blind_since
            log.info("slurm answers again", blind_for_s=round(blind_for, 1))
            if self._blind_alerted:
                self.sink.publish(
                    RunEvent(
                        DAEMON_THREAD,
                        "recovered",
                        f"shepherd sees Slurm again after {int(blind_for)} s",
                        level="info",
                        fields={"name": "shepherd daemon"},
                    )
                )
        self._blind_alerted = False
        self.blind_since = None
        self.last_poll_ok = self.clock()

    async def _apply(
        self, run_id: str, n: int, kind: UpdateKind, obs: JobObservation | None, missing_since: float | None
    ) -> None:
        run = self.store.get_run(run_id)
        attempt = self.store.get_attempt(run_id, n)
        if run is None or attempt is None:
            return
        if kind in (UpdateKind.FOUND, UpdateKind.NEVER_SUBMITTED) and attempt.state != AttemptState.INTENT:
            return  # settled since this poll's snapshot (its sbatch returned meanwhile)
        if kind == UpdateKind.FOUND and obs is not None:
            self.store.attempt_submitted(run_id, n, obs.job_id, reconciled=True)
            log.info("intent reconciled with its job", run_id=run_id, attempt=n, job_id=obs.job_id)
            return
        if kind == UpdateKind.NEVER_SUBMITTED:
            self.store.attempt_not_submitted(
                run_id,
                n,
                AttemptState.NEVER_SUBMITTED,
                "Slurm has no job with this tag: sbatch never ran; submitting again",
            )
            if not run.state.is_final:
                self.store.set_run_state(run_id, RunState.QUEUED, next_attempt=attempt.overrides)
                self._wake_scheduler.set()
            return
        if kind == UpdateKind.MISSING:
            if attempt.unknown_since is None:
                log.warning(
                    "job not visible in Slurm; treating as unknown, not finished", run_id=run_id, attempt=n
                )
            self.store.observe_attempt(
                run_id,
                n,
                slurm_state=attempt.slurm_state or "UNKNOWN",
                reason=attempt.reason,
                nodes=None,
                unknown_since=missing_since,
            )
            return
        if kind == UpdateKind.UNKNOWN:
            grace = self.settings.slurm.unknown_grace_s
            msg = f"job {attempt.job_id} vanished from Slurm (not in squeue or sacct for {grace:.0f}s)"
            self.store.mark_attempt_unknown(run_id, n, msg)
            if not run.state.is_final:
                self.store.set_run_state(
                    run_id, RunState.LOST, reason=msg, event=("lost", msg, {}), attempt=n
                )
            await self._emit(
                run_id, n, StateEvent(run_id, n, attempt.job_id or "", JobState.UNKNOWN, msg, at=self.clock())
            )
            return
        assert obs is not None
        ended = kind == UpdateKind.ENDED
        started = obs.state in (JobState.RUNNING, JobState.COMPLETING) or (ended and bool(obs.start_time))
        changed = (obs.state.value != attempt.slurm_state) or (obs.reason != (attempt.reason or ""))
        self.store.observe_attempt(
            run_id,
            n,
            slurm_state=obs.state.value,
            reason=obs.reason,
            nodes=obs.nodes,
            exit_code=obs.exit_code,
            ended=ended,
            started=started,
            unknown_since=missing_since,
        )
        # Settled on squeue's word alone (30 s after it showed the end): sacct could not give the exit code.
        exit_code_owed = ended and obs.exit_code is None and obs.source == "squeue"
        if ended:
            crash_point("after-ended")
        if not run.state.is_final and run.state not in (RunState.BACKOFF, RunState.QUEUED):
            if obs.state == JobState.PENDING and run.state != RunState.PENDING and not run.held:
                self.store.set_run_state(run_id, RunState.PENDING)
            elif obs.state == JobState.RUNNING and run.state != RunState.RUNNING:
                self.sink.publish(RunEvent(run_id, "started", f"attempt {n} running on {obs.nodes}"))
                self.store.set_run_state(
                    run_id,
                    RunState.RUNNING,
                    event=("running", f"attempt {n} running on {obs.nodes}", {"nodes": obs.nodes}),
                    attempt=n,
                )
        if changed or ended:
            if changed and not ended:
                log.info("job state", run_id=run_id, attempt=n, state=obs.state.value, reason=obs.reason)
            event = StateEvent(
                run_id,
                n,
                obs.job_id,
                obs.state,
                obs.reason,
                obs.exit_code,
                obs.signal,
                obs.nodes,
                at=self.clock(),
            )
            if ended:
                why = ""
                if exit_code_owed:
                    why = " (exit code not known yet: " + (
                        "Slurm accounting (sacct) unavailable; recorded when it answers)"
                        if self.accounting_down_since is not None
                        else "sacct has no record of the job yet)"
                    )
                self.store.add_event(
                    run_id,
                    n,
                    "ended",
                    f"attempt {n} ended {obs.state.value}"
                    + (f" exit {obs.exit_code}" if obs.exit_code is not None else "")
                    + why,
                    {"state": obs.state.value, "exit_code": obs.exit_code, "exit_code_owed": exit_code_owed},
                )
                log.info(
                    "job ended",
                    run_id=run_id,
                    attempt=n,
                    state=obs.state.value,
                    exit_code=obs.exit_code,
                    **({"exit_code_owed": True} if exit_code_owed else {}),
                )
            await self._emit(run_id, n, event)

    async def _emit(self, run_id: str, n: int, event: StateEvent) -> None:
        run = self.store.get_run(run_id)
        attempt = self.store.get_attempt(run_id, n)
        if run is None or attempt is None:
            return
        if not self.state_handlers and event.state.is_terminal and attempt.state == AttemptState.ENDED:
            self._default_end(run, attempt, event)
        for handler in self.state_handlers:
            try:
                await handler(run, attempt, event)
            except Exception:
                log.exception("state handler failed", run_id=run_id, attempt=n)

    def _default_end(self, run: RunRow, attempt: AttemptRow, event: StateEvent) -> None:
        """Without rules attached: completed is completed, anything else stops and waits for a human."""
        if run.state.is_final or attempt.n != (self.store.latest_attempt(run.id) or attempt).n:
            return
        if event.state == JobState.COMPLETED:
            self.store.set_run_state(run.id, RunState.COMPLETED, reason="completed")
        else:
            self.store.set_run_state(
                run.id,
                RunState.FAILED,
                reason=f"{event.state.value}"
                + (f" exit {event.exit_code}" if event.exit_code is not None else ""),
            )

    def schedule(self, run_id: str, *, at: float, overrides: AttemptOverrides, reason: str) -> None:
        self.store.set_run_state(
            run_id,
            RunState.BACKOFF,
            next_action_at=at,
            next_attempt=overrides.to_dict(),
            event=("resume-scheduled", reason, json.loads(json.dumps(overrides.to_dict()))),
        )
        self._wake_scheduler.set()

    def status_summary(self) -> dict[str, Any]:
        runs = self.store.list_runs()
        counts: dict[str, int] = {}
        for r in runs:
            counts[r.state.value] = counts.get(r.state.value, 0) + 1
        return {
            "counts": counts,
            "blind_since": self.blind_since,
            "accounting_down_since": self.accounting_down_since,
        }
