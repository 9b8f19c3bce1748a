"""The daemon's NoticeSink on Slack: every notice goes to its run's thread through the outbox."""

from __future__ import annotations

from pathlib import Path

from supervisor.domain.notices import Notice
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

    def publish(self, notice: Notice) -> None:
        if notice.kind == "opened" or self.notifier.thread(notice.run_id) is None:
            target = self.target(notice.run_id)
            self.notifier.run_opened(
                notice.run_id,
                notice.fields.get("name", notice.run_id),
                spec_summary=notice.fields.get("summary", ""),
                job_id=notice.fields.get("job_id"),
                log_paths=[p for p in notice.fields.get("logs", "").split("\n") if p],
                channel=target.channel,
                level=target.level,
            )
            if notice.kind == "opened":
                return
        if notice.kind == "wandb":  # a link found in the logs: it belongs in the thread's first message
            self.notifier.add_link(notice.run_id, "W&B run", notice.fields.get("url", ""))
            return
        self.notifier.event(
            notice.run_id,
            notice.kind,
            notice.title,
            notice.text,
            level=notice.level,
            excerpt=notice.excerpt,
            buttons=notice.needs_human or notice.kind in ("alert", "gave_up"),
            needs_human=notice.needs_human,
            rule=notice.rule,
            parent=notice.fields.get("parent"),
        )

    def publish_plot(self, run_id: str, png: str, title: str) -> None:
        self.notifier.upload_plot(run_id, Path(png), title)
