"""Before a daemon builds anything, it waits for the root's lease: a second daemon (another login node, a
Slurm-hosted one) stays a standby, telling systemd it is up and alive, until the holder stops renewing."""

from __future__ import annotations

import signal

import anyio
import structlog

from supervisor.lease import Lease
from supervisor.service.sdnotify import Notifier

log = structlog.get_logger(__name__)


async def stand_by(lease: Lease, sd: Notifier) -> bool:
    """Wait until `lease` is ours (True), or until SIGTERM/SIGINT (False). The standby is a healthy service
    (READY=1, WATCHDOG=1 while it waits) whose status line says who holds the lease."""
    got = False
    ready = False

    def waiting(why: str) -> None:
        nonlocal ready
        line = f"standby: lease {why}"
        if not ready:
            sd.ready(line)
            ready = True
        else:
            sd.status(line)
        sd.watchdog()

    async with anyio.create_task_group() as tg:

        async def signals() -> None:
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as received:
                async for signum in received:
                    log.info("stopping while standing by", signal=signal.Signals(signum).name)
                    sd.stopping()
                    tg.cancel_scope.cancel()
                    return

        async def take() -> None:
            nonlocal got
            await lease.acquire(waiting)
            got = True
            tg.cancel_scope.cancel()

        tg.start_soon(signals)
        tg.start_soon(take)
    return got
