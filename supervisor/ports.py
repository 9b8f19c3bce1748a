"""The few interfaces between stages, so each stage can be driven by an in-memory fake in its tests."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from supervisor.domain.notices import Notice
from supervisor.domain.overrides import AttemptOverrides
from supervisor.domain.runs import RunRow


class ControlError(Exception):
    """Unknown run, or the action makes no sense in the run's state: the message is for the person who asked
    (CLI, Slack)."""


class NoticeSink(Protocol):
    """Where notices about runs go (the log, Slack's outbox); publishing never blocks supervision."""

    def publish(self, notice: Notice) -> None: ...

    def publish_plot(self, run_id: str, png: str, title: str) -> None: ...


class SlurmControl(Protocol):
    """What acting on a decision asks of Slurm (the real client, or a fake in tests)."""

    async def cancel(self, job_id: str) -> None: ...

    async def hold(self, job_id: str) -> None: ...

    async def release(self, job_id: str) -> None: ...

    async def job_nodes(self, job_id: str) -> str: ...

    async def node_at(self, address: str, nodelist: str) -> str | None: ...

    async def node_state(self, node: str) -> str | None: ...


class Scheduler(Protocol):
    """Puts a run's next attempt on the daemon's schedule and wakes the loops that act on it."""

    def schedule(self, run_id: str, *, at: float, overrides: AttemptOverrides, reason: str) -> None: ...

    def wake(self) -> None: ...


class CheckpointResolver(Protocol):
    """(path, why) for `selector` (latest, best, step_N); `attempt` and `lineage` (the last attempt's dir)
    allow staging a dir for a trainer that always resumes from its newest step."""

    def __call__(
        self, run: RunRow, selector: str, *, attempt: int = 0, lineage: str | None = None
    ) -> tuple[str | None, str]: ...


class RunControl(Protocol):
    """What people's commands (Slack, CLI) dispatch to; each returns a message for the person who asked."""

    async def resume(self, run: str, checkpoint: str, actor: str, sets: Sequence[str] = ()) -> str: ...

    async def cancel(self, run: str, actor: str) -> str: ...

    async def hold(self, run: str, actor: str) -> str: ...

    async def release(self, run: str, actor: str) -> str: ...

    async def give_up(self, run: str, actor: str) -> str: ...

    async def status(self, run: str | None) -> str: ...

    async def silence(self, target: str, seconds: float, actor: str) -> str: ...

    async def plot(self, run: str, actor: str) -> str: ...  # renders, queues the upload into the thread

    async def report(
        self, run: str, actor: str
    ) -> str: ...  # the goodput summary; its timeline into the thread
