"""Where notices go: the log always, other sinks (Slack) beside it, none able to stop supervision.

The daemon calls an `EventSink`; the Slack notifier (with its SQLite outbox)
is one implementation, the log is another. Enqueueing must never block
supervision: implementations write to their outbox and return.
"""

from __future__ import annotations

from collections.abc import Sequence

import structlog

from supervisor.domain.notices import RunEvent
from supervisor.ports import EventSink

log = structlog.get_logger(__name__)


class LogSink:
    """The always-present sink: every event also goes to the daemon's log."""

    def publish(self, event: RunEvent) -> None:
        getattr(log, "warning" if event.level == "error" else event.level)(
            event.title, run_id=event.run_id, kind=event.kind, rule=event.rule
        )

    def publish_plot(self, run_id: str, png: str, title: str) -> None:
        log.info("plot rendered", run_id=run_id, png=png)


class FanOut:
    """Several sinks; one failing never stops the others or supervision."""

    def __init__(self, sinks: Sequence[EventSink]) -> None:
        self.sinks = list(sinks)

    def publish(self, event: RunEvent) -> None:
        for sink in self.sinks:
            try:
                sink.publish(event)
            except Exception:
                log.exception("notification sink failed", sink=type(sink).__name__, run_id=event.run_id)

    def publish_plot(self, run_id: str, png: str, title: str) -> None:
        for sink in self.sinks:
            try:
                sink.publish_plot(run_id, png, title)
            except Exception:
                log.exception("notification sink failed", sink=type(sink).__name__, run_id=run_id)
