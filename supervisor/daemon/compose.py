"""The one place that builds the daemon: each part is constructed once, in dependency order, from
settings; tests and benchmarks hand in fakes for the edges (the store, Slurm, extra sinks, the clock)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import anyio
import structlog
import watchfiles

from supervisor.act.actions import Actions
from supervisor.act.checkpoints import resolve_checkpoint_for_run
from supervisor.act.control import Controller, DaemonRunControl
from supervisor.act.forensics import JobForensics
from supervisor.daemon.loops import DAEMON_THREAD, Daemon, Task
from supervisor.daemon.metrics import MetricsExporter, StoreCollector
from supervisor.daemon.monitor import Monitor
from supervisor.daemon.wakeups import StoreScheduler, Wakeups
from supervisor.domain.notices import Notice
from supervisor.intake.queue import Intake
from supervisor.logs import LogMode, configure_logging
from supervisor.notify.sinks import FanOut, LogSink
from supervisor.notify.slack.service import SlackOutbox, SlackService
from supervisor.notify.slack.sink import SlackSink
from supervisor.ports import NoticeSink
from supervisor.rules.loader import REPO_RULES, spec_rules_problems
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
) -> Built:
    settings.ensure_dirs()
    store = store if store is not None else Store(settings.db_path)
    slurm = slurm or SlurmClient(timeout_s=settings.slurm.command_timeout_s, bin_dir=settings.slurm.bin_dir)
    wakeups = Wakeups()
    heartbeats = HeartbeatRegistry()
    sd = Notifier()

    def run_state(run_id: str) -> str | None:
        run = store.get_run(run_id)
        return run.state.value if run else None

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

        Live: Slurm cadences, timeouts and grace periods, the log polling interval, rules folders.
        A file that does not validate raises before anything is swapped, so the old settings stay.
        """
        fresh = load_settings(settings.root)
        settings.slurm = fresh.slurm
        settings.watch = fresh.watch
        settings.rules_dirs = fresh.rules_dirs
        slurm.timeout_s = fresh.slurm.command_timeout_s
        monitor.changes.poll_interval_s = fresh.watch.poll_interval_s
        if fresh.slack != settings.slack:
            log.warning("slack settings changed: they take effect at the next restart")

    def alert(text: str) -> None:
        sink.publish(Notice(DAEMON_THREAD, "alert", text, level="error", fields={"name": "shepherd daemon"}))

    reloader = Reloader(
        [("rules", monitor.reload_rules), ("settings", reload_settings)], alert=alert, notifier=sd
    )

    async def watch_rules_files() -> None:
        """A changed rules file reloads like SIGHUP; a bad one keeps the old rules and alerts."""
        dirs = [d for d in {REPO_RULES, *settings.rules_dirs} if d.is_dir()]
        if not dirs:
            return
        async for _ in watchfiles.awatch(*dirs, debounce=300, recursive=False):
            await reloader.reload_now("rules file changed")

    tasks = [
        Task(Monitor.LOOP, monitor.run, Monitor.ALLOWANCE_S),
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


def run_daemon(settings: Settings, *, log_format: LogMode = "auto") -> int:
    configure_logging(log_format)
    built = build(settings)
    try:
        anyio.run(built.run)
    finally:
        built.store.close()
    log.info("daemon stopped")
    return 0
