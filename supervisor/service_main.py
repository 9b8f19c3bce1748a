"""`shepherd daemon`: build the parts from settings and run them until SIGTERM."""

from __future__ import annotations

import anyio
import structlog

from supervisor.actions import Actions
from supervisor.daemon import Daemon
from supervisor.monitor import Monitor
from supervisor.notify import EventSink, FanOut, LogSink
from supervisor.settings import Settings
from supervisor.slurm.client import SlurmClient
from supervisor.store import Store

log = structlog.get_logger(__name__)


def configure(log_format: str) -> None:
    from supervisor.logs import configure_logging

    configure_logging(log_format)  # type: ignore[arg-type]


def build_daemon(settings: Settings, sinks: list[EventSink] | None = None) -> tuple[Daemon, Monitor]:
    settings.ensure_dirs()
    store = Store(settings.db_path)
    slurm = SlurmClient(timeout_s=settings.slurm.command_timeout_s, bin_dir=settings.slurm.bin_dir)
    daemon = Daemon(settings, store, slurm)
    actions = Actions(daemon, FanOut([LogSink(), *(sinks or [])]))
    monitor = Monitor(daemon, actions)
    daemon.state_handlers.append(monitor.on_state)
    daemon.loop_allowance["monitor"] = 60.0
    daemon.actions = actions
    return daemon, monitor


def run_daemon(settings: Settings, *, log_format: str = "auto") -> int:
    configure(log_format)
    daemon, monitor = build_daemon(settings)
    try:
        anyio.run(lambda: daemon.run(extra_tasks=[monitor.run]))
    finally:
        daemon.store.close()
    log.info("daemon stopped")
    return 0
