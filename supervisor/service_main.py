"""`shepherd daemon`: build the parts from settings and run them until SIGTERM."""

from __future__ import annotations

import anyio
import structlog

from supervisor.daemon import Daemon
from supervisor.settings import Settings
from supervisor.slurm.client import SlurmClient
from supervisor.store import Store

log = structlog.get_logger(__name__)


def configure(log_format: str) -> None:
    try:
        from supervisor.logs import configure_logging
    except ImportError:  # pragma: no cover
        return
    configure_logging(log_format)  # type: ignore[arg-type]


def build_daemon(settings: Settings) -> Daemon:
    settings.ensure_dirs()
    store = Store(settings.db_path)
    slurm = SlurmClient(timeout_s=settings.slurm.command_timeout_s, bin_dir=settings.slurm.bin_dir)
    return Daemon(settings, store, slurm)


def run_daemon(settings: Settings, *, log_format: str = "auto") -> int:
    configure(log_format)
    daemon = build_daemon(settings)
    try:
        anyio.run(daemon.run)
    finally:
        daemon.store.close()
    log.info("daemon stopped")
    return 0
