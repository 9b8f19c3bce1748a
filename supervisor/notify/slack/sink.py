"""The daemon's EventSink on Slack: every RunEvent goes to the run's thread through the outbox."""

from __future__ import annotations

from collections.abc import Callable

from supervisor.domain.notices import RunEvent
from supervisor.notify.slack.notifier import Notifier


class SlackSink:
    def __init__(
        self,
        notifier: Notifier,
        channel_for: Callable[[str], str | None] = lambda _run: None,
        level_for: Callable[[str], str | None] = lambda _run: None,
    ) -> None:
        self.notifier = notifier
        self.channel_for = channel_for
        self.level_for = level_for  # the run's own notify.level; None: slack.level

    def publish(self, event: RunEvent) -> None:
        if event.kind == "opened" or self.notifier.thread(event.run_id) is None:
            self.notifier.run_opened(
                event.run_id,
                event.fields.get("name", event.run_id),
                spec_summary=event.fields.get("summary", ""),
                job_id=event.fields.get("job_id"),
                log_paths=[p for p in event.fields.get("logs", "").split("\n") if p],
                channel=self.channel_for(event.run_id),
                level=self.level_for(event.run_id),
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
        from pathlib import Path

        self.notifier.upload_plot(run_id, Path(png), title)
