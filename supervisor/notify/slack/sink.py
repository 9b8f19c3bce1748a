"""The daemon's EventSink on Slack: every notice goes to its run's thread through the outbox."""

from __future__ import annotations

from pathlib import Path

from supervisor.domain.notices import RunEvent
from supervisor.notify.routing import ThreadTarget, thread_target
from supervisor.notify.slack.notifier import Notifier
from supervisor.store import Store


class SlackSink:
    def __init__(self, notifier: Notifier, store: Store | None = None) -> None:
        self.notifier = notifier
        self.store = store  # where each run's spec says its channel and level

    def target(self, run_id: str) -> ThreadTarget:
        run = self.store.get_run(run_id) if self.store is not None else None
        return thread_target(run.spec.notify if run is not None else None)

    def publish(self, event: RunEvent) -> None:
        if event.kind == "opened" or self.notifier.thread(event.run_id) is None:
            target = self.target(event.run_id)
            self.notifier.run_opened(
                event.run_id,
                event.fields.get("name", event.run_id),
                spec_summary=event.fields.get("summary", ""),
                job_id=event.fields.get("job_id"),
                log_paths=[p for p in event.fields.get("logs", "").split("\n") if p],
                channel=target.channel,
                level=target.level,
            )
            if event.kind == "opened":
                return
        self.notifier.event(
            event.run_id,
            event.kind,
            event.title,
            event.text,
            level=event.level,
            excerpt=event.excerpt,
            buttons=event.needs_human or event.kind in ("alert", "gave_up"),
            needs_human=event.needs_human,
            rule=event.rule,
            parent=event.fields.get("parent"),
        )

    def publish_plot(self, run_id: str, png: str, title: str) -> None:
        self.notifier.upload_plot(run_id, Path(png), title)
