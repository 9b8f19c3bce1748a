"""What the daemon says about a run, independent of where it is said.

The daemon calls an `EventSink`; the Slack notifier (with its SQLite outbox)
is one implementation, the log is another. Enqueueing must never block
supervision: implementations write to their outbox and return.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

import structlog

Level = Literal["debug", "info", "warning", "error"]
log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class RunEvent:
    """One thing worth telling people about a run."""

    run_id: str
    kind: str  # opened, started, resumed, alert, completed, gave_up, cancelled, ...
    title: str
    text: str = ""
    level: Level = "info"
    excerpt: str | None = None
    needs_human: bool = False  # also summarised in the channel, with buttons
    fields: dict[str, str] = field(default_factory=dict)
    rule: str | None = None


class EventSink(Protocol):
    def publish(self, event: RunEvent) -> None: ...

    def publish_plot(self, run_id: str, png: str, title: str) -> None: ...


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
