"""Nudges between the loops (a claimed spec, a scheduled resume, a command); the Scheduler port on them."""

from __future__ import annotations

import json

import anyio

from supervisor.domain.overrides import AttemptOverrides
from supervisor.domain.runs import RunState
from supervisor.store import Store


class Wakeups:
    """One event per loop; a loop waits on its own with a timeout and clears it when it wakes."""

    def __init__(self) -> None:
        self._scheduler = anyio.Event()
        self._poller = anyio.Event()

    def scheduler(self) -> None:
        self._scheduler.set()

    def poller(self) -> None:
        self._poller.set()

    def all(self) -> None:
        """Something changed outside the loops (a command): look at the runs now."""
        self.scheduler()
        self.poller()

    async def wait_scheduler(self, timeout_s: float) -> None:
        with anyio.move_on_after(timeout_s):
            await self._scheduler.wait()
        self._scheduler = anyio.Event()

    async def wait_poller(self, timeout_s: float, *, settle_s: float = 0.2) -> None:
        """Until woken (then `settle_s` more, so a burst of submissions lands in one poll) or the timeout."""
        with anyio.move_on_after(timeout_s):
            await self._poller.wait()
            await anyio.sleep(settle_s)
        self._poller = anyio.Event()


class StoreScheduler:
    """The Scheduler port: a resume is a BACKOFF run with its due time and overrides, then a wake-up."""

    def __init__(self, store: Store, wakeups: Wakeups) -> None:
        self.store = store
        self.wakeups = wakeups

    def schedule(self, run_id: str, *, at: float, overrides: AttemptOverrides, reason: str) -> None:
        self.store.set_run_state(
            run_id,
            RunState.BACKOFF,
            next_action_at=at,
            next_attempt=overrides.to_dict(),
            event=("resume-scheduled", reason, json.loads(json.dumps(overrides.to_dict()))),
        )
        # The poller too: the resume waits for Slurm to say the old job is gone, and while it waits the poll
        # runs at the fast cadence (loops.poll_interval) instead of finishing a steady minute first.
        self.wakeups.all()

    def wake(self) -> None:
        self.wakeups.all()
