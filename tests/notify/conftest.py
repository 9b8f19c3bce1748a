"""Shared pieces for the Slack tests: the loopback stand-in, a fresh outbox DB, a recording RunControl."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from supervisor.ports import ControlError
from supervisor.settings import SlackSettings
from supervisor.store import Store
from supervisor.testing.slack_standin import SlackStandin

BOT = "xoxb-1111-2222-standintoken"
APP = "xapp-1-A0STANDIN-3333-appleveltoken"
CHANNEL = "C0RUNS"
ALICE = "U0ALICE"  # authorised
BOB = "U0BOB"  # a stranger
CAROL = "U0CAROL"  # may only read status


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def standin() -> AsyncIterator[SlackStandin]:
    s = await SlackStandin().start()
    try:
        yield s
    finally:
        await s.stop()


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "shepherd.db"


@pytest.fixture
def db(db_path: Path) -> Iterator[sqlite3.Connection]:
    conn = Store(db_path).db
    yield conn
    conn.close()


def make_settings(standin: SlackStandin | None = None, **over: Any) -> SlackSettings:
    base: dict[str, Any] = {
        "mode": "socket",
        "bot_token": BOT,
        "app_token": APP,
        "base_url": standin.api_url if standin else "http://127.0.0.1:9/api/",
        "channel": CHANNEL,
        "authorised_users": [ALICE],
        "status_users": [CAROL],
        "retry_initial_s": 0.05,
        "retry_max_s": 0.3,
        "poll_interval_s": 0.05,
        "request_timeout_s": 3,
        "socket_ping_interval_s": 1.0,
        "group_wait_s": 0.0,  # an alert goes out at once unless a test is about incident grouping
    }
    base.update(over)
    return SlackSettings(**base)


@dataclass
class FakeControl:
    """Records what it was asked to do; knows one run and its state."""

    runs: dict[str, str] = field(default_factory=lambda: {"gsm8k-a": "FAILED"})
    calls: list[tuple[Any, ...]] = field(default_factory=list)
    gate: Any = None  # an anyio.Event to make actions slow

    def _known(self, run: str) -> None:
        if run not in self.runs:
            raise ControlError(f"no run called {run!r}")

    async def resume(self, run: str, checkpoint: str, actor: str, sets: Sequence[str] = ()) -> str:
        self._known(run)
        if self.gate is not None:
            await self.gate.wait()
        if self.runs[run] == "RUNNING":
            raise ControlError(f"{run} is running; nothing to resume")
        self.calls.append(("resume", run, checkpoint, actor, *sets))
        self.runs[run] = "RUNNING"
        return f"Resubmitted {run} from {checkpoint} checkpoint (job 4242)"

    async def cancel(self, run: str, actor: str) -> str:
        self._known(run)
        self.calls.append(("cancel", run, actor))
        return f"Cancelled {run}"

    async def hold(self, run: str, actor: str) -> str:
        self._known(run)
        self.calls.append(("hold", run, actor))
        return f"Held {run}"

    async def release(self, run: str, actor: str) -> str:
        self._known(run)
        self.calls.append(("release", run, actor))
        return f"Released {run}"

    async def give_up(self, run: str, actor: str) -> str:
        self._known(run)
        self.calls.append(("give_up", run, actor))
        self.runs[run] = "GAVE_UP"
        return f"Gave up on {run}"

    async def status(self, run: str | None) -> str:
        self.calls.append(("status", run))
        return "\n".join(f"{r}: {s}" for r, s in self.runs.items() if run in (None, r)) or "no such run"

    async def silence(self, target: str, seconds: float, actor: str) -> str:
        self.calls.append(("silence", target, seconds, actor))
        return f"Silenced {target} for {seconds / 3600:.0f}h"

    async def plot(self, run: str, actor: str) -> str:
        self._known(run)
        self.calls.append(("plot", run, actor))
        return f"Plotting {run}"

    async def report(self, run: str, actor: str) -> str:
        self._known(run)
        self.calls.append(("report", run, actor))
        return f"Reporting {run}"
