"""What Slack commands dispatch to: the daemon implements this with the CLI's own code path."""

from __future__ import annotations

from typing import Protocol

from supervisor.domain.notices import RunEvent


class RunControl(Protocol):
    async def resume(self, run: str, checkpoint: str, actor: str) -> str: ...  # returns a human message
    async def cancel(self, run: str, actor: str) -> str: ...
    async def hold(self, run: str, actor: str) -> str: ...
    async def release(self, run: str, actor: str) -> str: ...
    async def give_up(self, run: str, actor: str) -> str: ...
    async def status(self, run: str | None) -> str: ...
    async def silence(self, target: str, seconds: float, actor: str) -> str: ...
    async def plot(self, run: str, actor: str) -> str: ...  # renders, queues the upload into the thread


class ControlError(Exception):
    """Unknown run, or the action makes no sense in the run's state: the message is for the person who asked
    (CLI, Slack)."""


class EventSink(Protocol):
    def publish(self, event: RunEvent) -> None: ...

    def publish_plot(self, run_id: str, png: str, title: str) -> None: ...
