"""SIGHUP (`systemctl reload shepherd`) re-reads rules and settings; a bad new file keeps the old ones.

The loaders belong to other parts (rules, settings); this module only decides
*when* to call them and what happens when one fails. Each loader must parse
and validate the new files completely before swapping them in, and raise
otherwise: then the old rules stay active, the error is logged and an alert
goes out (Slack), and the daemon keeps running. A reload never crashes it.

systemd is told RELOADING=1 before and READY=1 after, as Type=notify-reload
expects (harmless with Type=notify).
"""

from __future__ import annotations

import inspect
import signal
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import anyio
import structlog
from anyio.abc import TaskStatus

from supervisor.redact import redact
from supervisor.service.sdnotify import Notifier

log = structlog.get_logger(__name__)

Loader = Callable[[], object]  # sync or async; raises on a bad file
Alert = Callable[[str], object]  # sync or async; e.g. post to the ops Slack channel


@dataclass
class ReloadResult:
    ok: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)

    @property
    def all_ok(self) -> bool:
        return not self.failed


async def _call(fn: Callable[..., object], *args: object) -> object:
    result = fn(*args)
    if inspect.isawaitable(result):
        return await result
    return result


class Reloader:
    """Runs named loaders on SIGHUP (or on demand, e.g. when watchfiles sees a rules file change)."""

    def __init__(
        self,
        loaders: Sequence[tuple[str, Loader]],
        *,
        alert: Alert | None = None,
        notifier: Notifier | None = None,
        status: Callable[[], str] | None = None,
    ) -> None:
        self.loaders = list(loaders)
        self._alert = alert
        self._notifier = notifier
        self._status = status
        self._lock = anyio.Lock()
        self.reloads = 0

    async def reload_now(self, reason: str = "SIGHUP") -> ReloadResult:
        """Call every loader; one failing does not stop the others (bad rules, fine settings)."""
        async with self._lock:  # a second SIGHUP during a reload waits, it does not interleave
            self.reloads += 1
            if self._notifier is not None:
                self._notifier.reloading()
            result = ReloadResult()
            for name, loader in self.loaders:
                try:
                    await _call(loader)
                except Exception as exc:
                    message = redact(f"{type(exc).__name__}: {exc}")
                    result.failed[name] = message
                    log.error(
                        "reload failed, keeping the previous version", part=name, reason=reason, error=message
                    )
                    await self._send_alert(
                        f"Reload of {name} failed; still using the previous {name}. {message}"
                    )
                else:
                    result.ok.append(name)
            log.info("reloaded", reason=reason, ok=result.ok, failed=sorted(result.failed))
            if self._notifier is not None:
                self._notifier.ready(self._status_line(result))
            return result

    def _status_line(self, result: ReloadResult) -> str | None:
        base = None
        if self._status is not None:
            try:
                base = self._status()
            except Exception:
                log.exception("status callback failed")
        if result.failed:
            note = "reload failed: " + ", ".join(sorted(result.failed))
            return f"{base}; {note}" if base else note
        return base

    async def _send_alert(self, text: str) -> None:
        if self._alert is None:
            return
        try:
            await _call(self._alert, text)
        except Exception:
            log.exception("reload alert could not be delivered")

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Wait for SIGHUP forever; start with `await tg.start(reloader.run)` so the handler is in place
        before anyone can send the signal (an unhandled SIGHUP would terminate the daemon)."""
        with anyio.open_signal_receiver(signal.SIGHUP) as signals:
            task_status.started()
            async for _ in signals:
                await self.reload_now("SIGHUP")
