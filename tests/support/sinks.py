"""An in-memory NoticeSink (supervisor/ports.py) that keeps what it was given: what the daemon said."""

from __future__ import annotations

from supervisor.domain.notices import Notice


class RecordingSink:
    def __init__(self) -> None:
        self.notices: list[Notice] = []

    def publish(self, notice: Notice) -> None:
        self.notices.append(notice)

    def publish_plot(self, run_id: str, png: str, title: str) -> None:
        pass
