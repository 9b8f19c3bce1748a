"""The one place that builds the daemon: each part is constructed once, in dependency order, from
settings; tests and benchmarks hand in fakes for the edges (the store, Slurm, extra sinks, the clock)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial

import anyio
import anyio.from_thread
import structlog

from supervisor.act.actions import Actions
from supervisor.act.checkpoints import resolve_checkpoint_for_run
from supervisor.act.control import Controller, DaemonRunControl
from supervisor.act.forensics import JobForensics
from supervisor.act.mailbox import Mailbox, handlers, make_lease, serve
from supervisor.daemon import rulewatch
from supervisor.daemon.loops import DAEMON_THREAD, Daemon, Task
from supervisor.daemon.metrics import MetricsExporter, StoreCollector
from supervisor.daemon.monitor import Monitor, cadence_of
from supervisor.daemon.standby import stand_by
from supervisor.daemon.wakeups import StoreScheduler, Wakeups
from supervisor.domain.notices import Notice
from supervisor.domain.runs import RunState
from supervisor.domain.spec import JobSpec
from supervisor.intake.queue import Intake
from supervisor.lease import Lease
from supervisor.logs import LogMode, configure_logging
from supervisor.notify.sinks import FanOut, LogSink
from supervisor.notify.slack.incidents import CLOSED_BY_PERSON
from supervisor.notify.slack.service import SlackOutbox, SlackService
from supervisor.notify.slack.sink import SlackSink
from supervisor.ports import NoticeSink
from supervisor.preflight.probe import run_preflight
from supervisor.rules.loader import DEFAULT_RULES_DIR, spec_rules_problems
from supervisor.service.reload import Reloader
from supervisor.service.sdnotify import Notifier
from supervisor.service.watchdog import HeartbeatRegistry
from supervisor.settings import Settings, load_settings
from supervisor.slurm.client import SlurmClient
from supervisor.store import Store

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class Built:
    """The daemon and the parts around it, for `run_daemon`, tests and benchmarks."""

    settings: Settings
    store: Store
    slurm: SlurmClient
    sink: NoticeSink
    controller: Controller
    actions: Actions
    monitor: Monitor
    heartbeats: HeartbeatRegistry
    reloader: Reloader
    daemon: Daemon
    slack: SlackService | None
    metrics: MetricsExporter | None = None

    async def run(self) -> None:
        await self.daemon.run()


def build(
    settings: Settings,
    *,
    store: Store | None = None,
    slurm: SlurmClient | None = None,
    sinks: Sequence[NoticeSink] = (),
    clock: Callable[[], float] = time.time,
    environ: Mapping[str, str] | None = None,
    lease: Lease | None = None,
    sd: Notifier | None = None,
) -> Built:
    """With `lease` (what `run_daemon` passes: the daemon holds it already), every store write is guarded and
    every sbatch/scancel/hold fenced by it; tests without one run a single daemon unguarded."""
    settings.ensure_dirs()
    guard = lease.guard if lease is not None else None
    store = store if store is not None else Store(settings.db_path, write_guard=guard)
    slurm = slurm or SlurmClient(
        timeout_s=settings.slurm.command_timeout_s,
        bin_dir=settings.slurm.bin_dir,
        fence=lease.fence if lease is not None else None,
    )
    wakeups = Wakeups()
    heartbeats = HeartbeatRegistry()
    sd = sd or Notifier()

    def run_state(run_id: str) -> str | None:
        run = store.get_run(run_id)
        if run is None:
            return None
        if run.state == RunState.GAVE_UP and store.gave_up_by(run_id) is not None:
            return CLOSED_BY_PERSON  # a person's give-up settles it: the incident resolves
        return run.state.value

    outbox = (
        None
        if settings.slack.mode == "off"
        else SlackOutbox(store.db, settings.slack, environ=environ, clock=clock, run_state=run_state)
    )
    outlets: list[NoticeSink] = [LogSink(), *sinks]
    if outbox is not None:
        outlets.append(SlackSink(outbox.notifier, store))
    sink = FanOut(outlets)
    controller = Controller(
        store, slurm, resolve_checkpoint=resolve_checkpoint_for_run, on_change=wakeups.all
    )
    slack = (
        SlackService(outbox, DaemonRunControl(controller, settings, sink), environ=environ, clock=clock)
        if outbox is not None
        else None
    )
    forensics = JobForensics(
        slurm,
        settings.runs_dir,
        timeout_s=settings.forensics.timeout_s,
        python=str(settings.python) if settings.python else "python3",
    )
    actions = Actions(
        store, slurm, StoreScheduler(store, wakeups), sink, settings, clock=clock, forensics=forensics
    )
    monitor = Monitor(store, settings, actions, heartbeats, clock=clock)

    def reload_settings() -> None:
        """Re-read shepherd.toml and SHEPHERD_* env; what can change live is applied, the rest at restart.

        Live: Slurm cadences, timeouts and grace periods, the log polling cadence and budget, rules folders.
        A file that does not validate raises before anything is swapped, so the old settings stay.
        """
        fresh = load_settings(settings.root)
        settings.slurm = fresh.slurm
        settings.watch = fresh.watch
        settings.rules_dirs = fresh.rules_dirs
        slurm.timeout_s = fresh.slurm.command_timeout_s
        monitor.changes.set_cadence(cadence_of(fresh.watch))
        if fresh.slack != settings.slack:
            log.warning("slack settings changed: they take effect at the next restart")

    def alert(text: str) -> None:
        sink.publish(Notice(DAEMON_THREAD, "alert", text, level="error", fields={"name": "shepherd daemon"}))

    reloader = Reloader(
        [("rules", monitor.reload_rules), ("settings", reload_settings)], alert=alert, notifier=sd
    )

    async def watch_rules_files() -> None:
        """A changed rules file (shipped, configured, or a run's own) reloads like SIGHUP; a bad one keeps the
        old rules and alerts."""
        await rulewatch.watch_rules_files(
            lambda: {DEFAULT_RULES_DIR, *settings.rules_dirs},
            monitor.rules_files,
            reloader.reload_now,
            force_polling=settings.watch.force_polling,
        )

    def holder() -> str:
        if lease is None:
            return f"pid {os.getpid()}"
        return f"{lease.host}:{lease.pid}, generation {lease.generation}"

    mailbox = Mailbox(settings.requests_dir)
    tasks = [
        Task(Monitor.LOOP, monitor.run, Monitor.ALLOWANCE_S),
        Task("requests", partial(serve, mailbox, handlers(controller, settings, slurm), who=holder)),
        *([Task("slack", slack.run)] if slack is not None else []),
        Task("forensics", actions.run_forensics),
        Task("reloader", reloader.run),
        Task("rules-files", watch_rules_files),
    ]
    intake = Intake(
        settings.queue_dir,
        settings.runs_dir,
        settings.rejected_dir,
        max_bytes=settings.max_spec_bytes,
        settle_s=settings.spec_settle_s,
        clock=clock,
        check_spec=spec_rules_problems,
        preflight=intake_preflight(settings) if settings.preflight.at_intake else None,
        guard=guard,
    )
    daemon = Daemon(
        settings,
        store,
        slurm,
        intake=intake,
        actions=actions,
        on_state=monitor.on_state,
        sink=sink,
        wakeups=wakeups,
        heartbeats=heartbeats,
        sd=sd,
        tasks=tasks,
        clock=clock,
        lease=lease,
    )
    metrics = None
    if settings.metrics.enabled:
        collector = StoreCollector(
            store.path,
            settings.metrics,
            blind_since=lambda: daemon.blind_since,
            accounting_down_since=lambda: daemon.accounting_down_since,
            clock=clock,
        )
        metrics = MetricsExporter(settings.metrics, collector)
        slurm.on_call = metrics.telemetry.slurm_call
        monitor.on_log_bytes = metrics.telemetry.log_bytes_read
        monitor.on_poll_load = metrics.telemetry.poll_load
        daemon.tasks = (*daemon.tasks, Task("metrics", metrics.run))
    return Built(
        settings,
        store,
        slurm,
        sink,
        controller,
        actions,
        monitor,
        heartbeats,
        reloader,
        daemon,
        slack,
        metrics,
    )


def intake_preflight(settings: Settings) -> Callable[[JobSpec], list[str]]:
    """Preflight for the intake's worker thread: run on the daemon's loop, blocking problems returned as
    the spec's errors, warnings logged. Its own Slurm client: `--test-only` submits nothing (not fenced), and
    `scontrol show node` says whether the nodes are this machine."""
    pf = settings.preflight
    timeout = min(pf.timeout_s, settings.slurm.command_timeout_s)
    slurm = SlurmClient(timeout_s=timeout, bin_dir=settings.slurm.bin_dir)
    ask = partial(
        run_preflight,
        slurm=slurm if pf.test_only else None,
        nodes=slurm,
        timeout_s=pf.timeout_s,
        shared_paths=pf.shared_paths,
    )

    def check(spec: JobSpec) -> list[str]:
        problems = anyio.from_thread.run(partial(ask, spec))
        for p in problems:
            if not p.blocking:
                log.warning("preflight could not check everything", spec=spec.name, problem=str(p))
        return [str(p) for p in problems if p.blocking]

    return check


EXIT_STEPPED_DOWN = 75  # EX_TEMPFAIL: systemd (Restart=on-failure) or the Slurm host job starts a standby


def run_daemon(settings: Settings, *, log_format: LogMode = "auto") -> int:
    """Stand by for the root's lease, then build and run the daemon under it; 75 if it was lost."""
    configure_logging(log_format)
    settings.ensure_dirs()
    lease = make_lease(settings)
    sd = Notifier()
    built: Built | None = None

    async def main() -> None:
        nonlocal built
        if not await stand_by(lease, sd):
            return
        lease.start_renewing()  # now, not when the loops start: building the daemon can outlast a short lease
        built = build(settings, lease=lease, sd=sd)
        await built.run()

    try:
        anyio.run(main)
    finally:
        if built is not None:
            built.store.close()
        if built is None or built.daemon.stepped_down is None:
            lease.release()
    if built is not None and built.daemon.stepped_down is not None:
        log.error("daemon stepped down: another daemon holds the lease now", reason=built.daemon.stepped_down)
        return EXIT_STEPPED_DOWN
    log.info("daemon stopped")
    return 0
