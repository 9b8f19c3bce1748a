"""The daemon's loops in one anyio task group: intake, scheduler, Slurm poller, and the tasks it is given.

The queue watcher claims specs, the scheduler submits first attempts and due resumes, the poller looks at
Slurm once per poll for every run and writes down what each update changes (decide/transitions.py).
Start-up reconciles every unfinished intent with Slurm and finishes what a crash interrupted before
anything is submitted. Everything is built in `compose.py`.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import structlog
import watchfiles
from anyio.abc import TaskGroup

from supervisor.act import interval
from supervisor.act.actions import Actions
from supervisor.act.checkpoints import keep_the_choice, newest_checkpoint_step
from supervisor.act.inplace import install_runner
from supervisor.daemon.wakeups import Wakeups
from supervisor.decide.transitions import Transition, resubmitted, slurm_times, transition
from supervisor.domain.envfiles import PASS_ENV_FILE, EnvFileError, read_secret_env
from supervisor.domain.jobstate import JobState, describe_exit
from supervisor.domain.notices import Notice
from supervisor.domain.observations import StateEvent
from supervisor.domain.overrides import AttemptOverrides
from supervisor.domain.runs import AttemptRow, AttemptState, RunRow, RunState
from supervisor.domain.spec import JobSpec, load_spec
from supervisor.domain.yamlpos import YamlDocumentError
from supervisor.faultpoints import crash_point
from supervisor.intake.queue import Intake, Rejected, queue_dir_problem
from supervisor.lease import Lease, NotLeader
from supervisor.notify.rejections import rejections_notice
from supervisor.ports import NoticeSink
from supervisor.redact import add_known_secrets, known_secrets
from supervisor.service.sdnotify import Notifier
from supervisor.service.watchdog import (
    HeartbeatRegistry,
    StatusSummary,
    Watchdog,
    format_duration,
    format_status,
)
from supervisor.settings import Settings
from supervisor.slurm.client import Fenced, SlurmClient, SlurmError, SlurmRejected, SlurmUnavailable
from supervisor.slurm.launchers import layout, runner
from supervisor.slurm.parse import JobObservation, make_job_name
from supervisor.slurm.reconcile import AttemptUpdate, reconcile, sacct_needed
from supervisor.slurm.submit import base_log_dir, build_submit_request
from supervisor.store import Store

log = structlog.get_logger(__name__)

DAEMON_THREAD = "shepherd-daemon"  # the Slack thread for the daemon's own health, not a run's
StateHandler = Callable[[RunRow, AttemptRow, StateEvent], Awaitable[None]]
OWED_EXIT_CODE_MAX_AGE_S = 86400.0  # stop asking sacct for an exit code after a day


@dataclass(frozen=True, slots=True)
class Task:
    """A long-running part the daemon runs beside its own loops; `allowance_s`: watched by the watchdog."""

    name: str
    run: Callable[[], Coroutine[Any, Any, None]]
    allowance_s: float | None = None


def completing(attempt: AttemptRow) -> bool:
    """Slurm is stopping the attempt's job (a scancelled job is COMPLETING at once): its processes may still
    write."""
    return attempt.slurm_state == JobState.COMPLETING.value


class Daemon:
    def __init__(
        self,
        settings: Settings,
        store: Store,
        slurm: SlurmClient,
        *,
        intake: Intake,
        actions: Actions,
        on_state: StateHandler,
        sink: NoticeSink,
        wakeups: Wakeups,
        heartbeats: HeartbeatRegistry,
        sd: Notifier,
        tasks: Sequence[Task] = (),
        clock: Callable[[], float] = time.time,
        lease: Lease | None = None,
    ) -> None:
        self.settings = settings
        self.lease = lease
        self.stepped_down: str | None = None  # why, once the lease was lost
        self.store = store
        self.slurm = slurm
        self.intake = intake
        self.actions = actions
        self.on_state = on_state
        self.sink = sink
        self.wakeups = wakeups
        self.heartbeats = heartbeats
        self.sd = sd
        self.tasks = tuple(tasks)
        self.clock = clock
        self.in_flight: set[tuple[str, int]] = set()
        # Every attempt in flight at any moment of the current poll: its squeue/sacct snapshot may predate
        # the job, so the poll must conclude nothing about it (else: "never submitted" -> submitted twice).
        self._flown: set[tuple[str, int]] = set()
        self.blind_since: float | None = None
        self._blind_alerted = False
        # sacct (slurmdbd) can be down while squeue answers: ends are settled from squeue, and their exit
        # codes are asked for again until sacct has them (see exit_codes_owed).
        self.accounting_down_since: float | None = None
        self.ready = anyio.Event()
        self._untold: list[Rejected] = []  # rejections not told to people yet, and since when
        self._untold_since = 0.0
        self.python_bin_dir = settings.python.parent if settings.python else Path(sys.executable).parent

    def loop_allowance(self) -> dict[str, float]:
        """How long each loop may stay silent before the watchdog calls it wedged."""
        slow = self.settings.slurm
        own = {
            "intake": 60.0,
            "scheduler": 60.0 + 2 * slow.command_timeout_s,
            "poller": max(slow.idle_poll_interval_s, slow.steady_poll_interval_s)
            + 4 * slow.command_timeout_s
            + 30,
        }
        return own | {t.name: t.allowance_s for t in self.tasks if t.allowance_s is not None}

    # ---- lifecycle ------------------------------------------------------------------------------------
    async def run(self) -> None:
        self.settings.ensure_dirs()
        problem = queue_dir_problem(self.settings.queue_dir)
        if problem is not None:
            log.error("refusing to start: the queue folder is not private to the daemon", problem=problem)
            raise SystemExit(f"shepherd: refusing to start: {problem}")
        try:
            await self._run_loops()
        except* (NotLeader, Fenced) as refused:
            # A loop hit the fence (a write or a Slurm command refused) before the lease keeper saw the lapse
            # and stopped every loop: the same step-down, whichever noticed first.
            if self.lease is None or self.lease.held:
                raise
            self.stepped_down = self.stepped_down or self.lease.lost or str(refused.exceptions[0])
            self.sd.stopping(f"stepped down: {self.stepped_down}")

    async def _run_loops(self) -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._signals, tg)
            if self.lease is not None:
                tg.start_soon(self.lease.keep, lambda why: self._step_down(tg, why))
            self.adopt_orphans()
            self.learn_run_secrets()
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
            for name, allowance in self.loop_allowance().items():
                self.heartbeats.register(name, allowance)
            tg.start_soon(self.intake_loop)
            tg.start_soon(self.scheduler_loop)
            tg.start_soon(self.poll_loop)
            tg.start_soon(Watchdog(self.heartbeats, self.sd, status=self.status_summary_for_systemd).run)
            for task in self.tasks:
                tg.start_soon(task.run)

    @property
    def generation(self) -> int | None:
        """The lease generation this daemon acts under (put in every job's tag); None without a lease."""
        return self.lease.generation if self.lease is not None else None

    def _step_down(self, tg: TaskGroup, why: str) -> None:
        """The lease is lost: stop every loop at once. Nothing more is written or run (the store's guard and
        the Slurm client's fence refuse already); the process exits and its manager starts a standby."""
        self.stepped_down = why
        self.sd.stopping(f"stepped down: {why}")
        tg.cancel_scope.cancel()

    async def _signals(self, tg: TaskGroup) -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for signum in signals:
                log.info("stopping", signal=signal.Signals(signum).name)
                self.sd.stopping()
                tg.cancel_scope.cancel()
                return

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

    def learn_run_secrets(self) -> None:
        """Register every unfinished run's env_files and pass_env values with redact(), so the lines its jobs
        write reach no decision, log or Slack message with them, after a restart too."""
        for run in self.store.list_runs(include_final=False):
            try:
                add_known_secrets(self._secret_env(run).values())
            except EnvFileError as exc:  # said again, and the run failed, at its next submission
                log.warning("a run's secrets are not readable now", run_id=run.id, error=str(exc))

    def _daemon_secrets(self) -> list[str]:
        """The daemon's own secrets, never passed on: its Slack tokens (read now; a token file that went
        unreadable since start-up leaves those registered then) and every secret registered with redact()."""
        try:
            tokens = self.settings.slack.secrets()
        except EnvFileError:
            tokens = []
        return [*tokens, *known_secrets()]

    def _secret_env(self, run: RunRow) -> dict[str, str]:
        spec = run.spec
        return read_secret_env(spec.env_files, spec.pass_env, self.settings.runs_dir / run.id / PASS_ENV_FILE)

    def adopt_orphans(self) -> None:
        """A crash between claiming a spec (rename) and recording the run leaves a run dir with no row."""
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
                    last.exit_signal,
                    last.nodes or "",
                    at=self.clock(),
                )
                await self._emit(run.id, last.n, ev)

    # ---- queue -----------------------------------------------------------------------------------------
    async def intake_loop(self) -> None:
        queue = self.settings.queue_dir
        await self.scan_queue()
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
                    self.heartbeats.beat_if_registered("intake")
                    await self.scan_queue()
            except Exception as exc:  # watcher broke (dir removed...): rescan by polling and retry
                log.error("queue watcher failed; retrying", error=str(exc))
                self.settings.ensure_dirs()
                await anyio.sleep(1)

    async def scan_queue(self) -> None:
        """Claim or reject every settled spec in the queue. The scan runs in a worker thread: parsing a
        queue of a thousand hostile specs takes seconds, and preflight stats the spec's paths (a hung NFS
        mount blocks there, not here) and asks `sbatch --test-only` back on this loop; the other loops keep
        beating."""
        claimed, rejected = await anyio.to_thread.run_sync(self.intake.scan)
        self._tell_rejections(rejected)
        for c in claimed:
            self.store.create_run(c.run_id, c.spec.name, c.spec.model_dump_json(), str(c.spec_path))
        if claimed:
            self.wakeups.scheduler()

    def _tell_rejections(self, rejected: Sequence[Rejected]) -> None:
        """People hear of rejections in one message once a sweep refuses nothing more (the watcher sweeps
        every second or so), or after `slack.group_wait_s` of a steady trickle: a flood of a thousand files,
        however many sweeps it takes, is one message."""
        now = self.clock()
        if rejected and not self._untold:
            self._untold_since = now
        self._untold.extend(rejected)
        if not self._untold or (rejected and now - self._untold_since < self.settings.slack.group_wait_s):
            return
        notice = rejections_notice(
            self._untold, thread=DAEMON_THREAD, rejected_dir=self.settings.rejected_dir
        )
        self._untold = []
        if notice is not None:
            self.sink.publish(notice)

    # ---- submission ------------------------------------------------------------------------------------
    async def scheduler_loop(self) -> None:
        last_adopt = self.clock()
        while True:
            self.heartbeats.beat_if_registered("scheduler")
            try:
                wait = await self.schedule_once()
                if self.clock() - last_adopt > 60:
                    self.adopt_orphans()  # a claim whose row could not be written (disk full, locked)
                    last_adopt = self.clock()
            except Exception:  # the store is full or locked, say: say so, keep going, retry
                log.exception("scheduling failed; retrying")
                wait = 5.0
            await self.wakeups.wait_scheduler(wait)

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
        # The next attempt may queue behind a COMPLETING job. What its trainer may still save on its way out:
        # submit_attempt.
        return not completing(last)

    async def _tuned_save_period(self, run: RunRow, overrides: AttemptOverrides) -> AttemptOverrides:
        """The overrides with the save period `checkpoint.tune_interval` passes (act/interval.py); the store
        is read here, the checkpoint dirs in a thread. Unreadable dirs leave the period as last passed."""
        spec = run.spec
        last = self.store.latest_attempt(run.id)
        if spec.checkpoint is None or not (
            spec.checkpoint.tune_interval or (last and last.overrides.get("save_period"))
        ):
            return overrides  # never tuned: nothing to pass or to keep
        st = interval.store_side(self.store, run, self.clock(), with_cluster=spec.checkpoint.tune_interval)
        dirs, train = interval.dirs_of(spec, overrides.checkpoint_dir)
        try:
            fs = await anyio.to_thread.run_sync(lambda: interval.file_side(dirs, train))
        except OSError as exc:
            log.warning("could not time the run's checkpoint saves", run_id=run.id, error=str(exc))
            fs = interval.FileSide((), (), None)
        period, why = interval.next_save_period(spec, st, fs)
        if period is not None:
            log.info("save period for the next attempt", run_id=run.id, save_period=period, why=why)
        return replace(overrides, save_period=period)

    def _install_runner(self, spec: JobSpec, run_id: str, run_dir: Path) -> Path | None:
        """The job-side runner copied into the job's log folder (where its output goes, so the job surely
        reaches it), or None when it cannot be written there (a full filesystem): the job is then submitted
        as it would be without restart in place, and fails or runs as it would have."""
        path = runner.script_path(base_log_dir(spec, run_dir), run_id)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            install_runner(path)
        except OSError as exc:
            log.warning(
                "could not write the job-side runner: submitting without it (no restart in place)",
                run_id=run_id,
                path=str(path),
                error=str(exc),
            )
            return None
        return path

    async def submit_attempt(self, run: RunRow) -> AttemptRow | None:
        spec = run.spec
        overrides = AttemptOverrides.from_dict(run.next_attempt)
        last = self.store.latest_attempt(run.id)
        # A resume may go ahead while the old job is COMPLETING (_previous_attempt_alive): its trainer may
        # still be saving on its way out.
        settled = last is None or not completing(last)
        try:
            overrides = await anyio.to_thread.run_sync(
                lambda: keep_the_choice(
                    spec, overrides, run_id=run.id, attempt=(last.n if last else 0) + 1, settled=settled
                )
            )
        except OSError as exc:  # the attempt goes ahead with the choice as it was; say why it may differ
            log.warning("could not stage the chosen checkpoint", run_id=run.id, error=str(exc))
        overrides = await self._tuned_save_period(run, overrides)
        # What existed at submission: the policy's measure of whether this attempt made progress.
        record = {**overrides.to_dict(), "ckpt_step_at_submit": newest_checkpoint_step(spec)}
        run_dir = self.settings.runs_dir / run.id
        runner_script = self._install_runner(spec, run.id, run_dir) if spec.resume.in_place else None
        if runner_script is not None:
            record.update({"runner": True, runner.BY_RUN: True})
        attempt = self.store.begin_attempt(
            run.id, lambda n: make_job_name(run.id, n), record, generation=self.generation
        )
        crash_point("after-intent")
        try:  # read at each submission: a key rotated in its env file reaches the next attempt
            secret_env = await anyio.to_thread.run_sync(lambda: self._secret_env(run))
        except EnvFileError as exc:
            self.store.attempt_not_submitted(run.id, attempt.n, AttemptState.SUBMIT_FAILED, str(exc))
            why = f"its secrets could not be read: {exc}; fix that, then `shepherd resume {run.id}`"
            self.store.set_run_state(
                run.id,
                RunState.FAILED,
                reason=why,
                event=("failed", f"attempt {attempt.n} not submitted: {why}", {}),
                attempt=attempt.n,
            )
            log.error("not submitting: the run's secrets could not be read", run_id=run.id, error=str(exc))
            return None
        add_known_secrets(secret_env.values())
        slack = self.settings.slack
        req = build_submit_request(
            spec,
            run_id=run.id,
            attempt=attempt.n,
            run_dir=run_dir,
            overrides=overrides,
            python_bin_dir=self.python_bin_dir,
            script=self.settings.launch_script,
            generation=self.generation,
            environ=os.environ,
            secret_env=secret_env,
            secret_names=slack.secret_env_names(),
            secret_values=self._daemon_secrets(),
            runner_script=runner_script,
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
        except Fenced as exc:
            # Nothing was run: the intent stays, and the daemon that holds the lease settles it by its tag.
            log.error("not submitting: this daemon does not hold the lease", run_id=run.id, error=str(exc))
            return None
        except SlurmUnavailable as exc:
            # The job may or may not exist: the poller settles the intent by its tag.
            log.warning("sbatch outcome unknown; will reconcile by tag", run_id=run.id, error=str(exc))
            self.wakeups.poller()
            return None
        finally:
            self.in_flight.discard(key)
        crash_point("after-sbatch")
        self.store.attempt_submitted(run.id, attempt.n, job_id)
        log.info("submitted", run_id=run.id, attempt=attempt.n, job_id=job_id)
        self._announce_submission(run, spec, attempt.n, job_id, req.env["BASE_LOG_DIR"])
        self.wakeups.poller()
        return self.store.get_attempt(run.id, attempt.n)

    def wake(self) -> None:
        """Something changed outside the loops (a command): look at the runs now."""
        self.wakeups.all()

    def _announce_submission(self, run: RunRow, spec: JobSpec, n: int, job_id: str, log_dir: str) -> None:
        s = spec.slurm
        summary = (
            f"{s.nodes} node(s) x {s.gpus_per_node} GPU, {s.cpus} CPUs"
            + (f", partition {s.partition}" if s.partition else "")
            + (f", time {s.time}" if s.time else "")
        )
        logs = "\n".join(str(p) for p in layout.announced_paths(Path(log_dir), job_id))
        if n == 1:
            self.sink.publish(
                Notice(
                    run.id,
                    "opened",
                    f"{run.name} submitted",
                    fields={"name": run.name, "summary": summary, "job_id": job_id, "logs": logs},
                )
            )
        else:
            self.sink.publish(resubmitted(run.id, n, job_id, AttemptOverrides.from_dict(run.next_attempt)))

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
            if r.state == RunState.BACKOFF and self._previous_attempt_alive(r):
                return s.poll_interval_s  # a resume waits for Slurm to say the old job is gone: look soon
        return s.steady_poll_interval_s

    async def poll_loop(self) -> None:
        failures = 0
        while True:
            self.heartbeats.beat_if_registered("poller")
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
            await self.wakeups.wait_poller(interval)

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
        if self.actions.holds_owed:
            await self.actions.retry_owed_holds()
        updates = reconcile(
            open_attempts,
            squeue,
            sacct,
            now=self.clock(),
            grace_s=self.settings.slurm.unknown_grace_s,
            in_flight=frozenset(self.in_flight | self._flown),
        )
        for u in updates:
            await self._apply(u)
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
                Notice(
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
        attempt_of = {job: key for key, job in owed.items()}
        for obs in sacct:
            key = attempt_of.get(obs.job_id)
            # By id, but never another job that got a reused id (its tag names another attempt).
            if key is None or (obs.tag is not None and obs.tag != key):
                continue
            if not obs.state.is_terminal or obs.exit_code is None:
                continue  # sacct lags: slurmctld has not sent it the job's end yet
            attempt = self.store.get_attempt(*key)
            if attempt is None or attempt.exit_code is not None:
                continue
            # Settled on squeue's word, the end was stamped with a poll's time: sacct's End replaces it.
            _, end = slurm_times(obs, started=False, ended=True, now=self.clock())
            self.store.observe_attempt(
                key[0],
                key[1],
                slurm_state=attempt.slurm_state or obs.state.value,
                reason=attempt.reason,
                nodes=obs.nodes,
                exit_code=obs.exit_code,
                exit_signal=obs.signal,
                ended_at=end,
            )
            msg = (
                f"attempt {key[1]} exit code recorded: {describe_exit(obs.exit_code, obs.signal)}"
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
                    Notice(
                        DAEMON_THREAD,
                        "recovered",
                        f"shepherd sees Slurm again after {int(blind_for)} s",
                        level="info",
                        fields={"name": "shepherd daemon"},
                    )
                )
        self._blind_alerted = False
        self.blind_since = None

    async def _apply(self, update: AttemptUpdate) -> None:
        """Write down what one update changes (decide/transitions.py), then let the rules see it."""
        run = self.store.get_run(update.run_id)
        attempt = self.store.get_attempt(update.run_id, update.n)
        if run is None or attempt is None:
            return
        tr = transition(
            update,
            run,
            attempt,
            now=self.clock(),
            grace_s=self.settings.slurm.unknown_grace_s,
            accounting_down=self.accounting_down_since is not None,
        )
        self._write(run, attempt, tr)
        if tr.observation is not None:
            await self._emit(run.id, attempt.n, tr.observation)

    def _write(self, run: RunRow, attempt: AttemptRow, tr: Transition) -> None:
        n = attempt.n
        a = tr.attempt
        if a is not None:
            if a.kind == "submitted":
                self.store.attempt_submitted(run.id, n, a.job_id or "", reconciled=True)
            elif a.kind == "never_submitted":
                self.store.attempt_not_submitted(run.id, n, AttemptState.NEVER_SUBMITTED, a.message)
            elif a.kind == "unknown":
                self.store.mark_attempt_unknown(run.id, n, a.message)
            else:
                self.store.observe_attempt(
                    run.id,
                    n,
                    slurm_state=a.slurm_state,
                    reason=a.reason,
                    nodes=a.nodes,
                    exit_code=a.exit_code,
                    exit_signal=a.exit_signal,
                    ended=a.ended,
                    started=a.started,
                    unknown_since=a.unknown_since,
                    started_at=a.started_at,
                    ended_at=a.ended_at,
                )
        if tr.ended:
            crash_point("after-ended")
        if tr.notice is not None:
            self.sink.publish(tr.notice)
        if tr.run is not None:
            self.store.set_run_state(
                run.id,
                tr.run.state,
                reason=tr.run.reason,
                next_attempt=tr.run.next_attempt,
                event=tr.run.event,
                attempt=n if tr.run.event else None,
            )
        if tr.history is not None:
            self.store.add_event(run.id, n, *tr.history)
        if tr.log is not None:
            level, message, fields = tr.log
            getattr(log, level)(message, run_id=run.id, **fields)
        if tr.wake_scheduler:
            self.wakeups.scheduler()

    async def _emit(self, run_id: str, n: int, event: StateEvent) -> None:
        """Hand a state to the rules (the monitor drains the attempt's logs first); its failure is logged."""
        run = self.store.get_run(run_id)
        attempt = self.store.get_attempt(run_id, n)
        if run is None or attempt is None:
            return
        try:
            await self.on_state(run, attempt, event)
        except Exception:
            log.exception("state handler failed", run_id=run_id, attempt=n)
