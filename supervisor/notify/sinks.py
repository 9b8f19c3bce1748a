"""Where notices go: the log always, other sinks (Slack) beside it, none able to stop supervision.

The daemon calls an `NoticeSink`; the Slack notifier (with its SQLite outbox)
is one implementation, the log is another. Enqueueing must never block
supervision: implementations write to their outbox and return.
"""

from __future__ import annotations

from collections.abc import Sequence

import structlog

from supervisor.domain.notices import Notice
from supervisor.ports import NoticeSink

log = structlog.get_logger(__name__)


class LogSink:
    """The always-present sink: every notice also goes to the daemon's log."""

    def publish(self, notice: Notice) -> None:
        getattr(log, "warning" if notice.level == "error" else notice.level)(
            notice.title, run_id=notice.run_id, kind=notice.kind, rule=notice.rule
        )

    def publish_plot(self, run_id: str, png: str, title: str) -> None:
        log.info("plot rendered", run_id=run_id, png=png)


class FanOut:
    """Several sinks; one failing never stops the others or supervision."""

    def __init__(self, sinks: Sequence[NoticeSink]) -> None:
        self.sinks = list(sinks)

    def publish(self, notice: Notice) -> None:
        for sink in self.sinks:
            try:
                sink.publish(notice)
            except Exception:
                log.exception("notification sink failed", sink=type(sink).__name__, run_id=notice.run_id)

    def publish_plot(self, run_id: str, png: str, title: str) -> None:
        for sink in self.sinks:
            try:
                sink.publish_plot(run_id, png, title)
            except Exception:
                log.exception("notification sink failed", sink=type(sink).__name__, run_id=run_id)
