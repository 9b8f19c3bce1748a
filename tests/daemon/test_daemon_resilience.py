"""A store error (disk full, locked past the busy timeout) must not end supervision: loops log and retry."""

import sqlite3
from pathlib import Path
from typing import Any

import anyio

from supervisor.daemon.compose import build
from supervisor.settings import Settings


def test_the_scheduler_survives_a_full_disk_and_carries_on(tmp_path: Path) -> None:
    built = build(Settings(root=tmp_path / "root"))
    daemon = built.daemon
    real = daemon.store.list_runs
    failures = {"left": 2}

    def flaky(**kw: Any) -> Any:
        if failures["left"]:
            failures["left"] -= 1
            raise sqlite3.OperationalError("database or disk is full")
        return real(**kw)

    daemon.store.list_runs = flaky  # type: ignore[method-assign]

    async def scenario() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(daemon.scheduler_loop)
            for _ in range(100):  # the loop retries every 5 s; wake it so the test stays short
                daemon.wake()
                await anyio.sleep(0.05)
                if failures["left"] == 0:
                    break
            await anyio.sleep(0.2)
            tg.cancel_scope.cancel()

    daemon.heartbeats.register("scheduler", 60)
    anyio.run(scenario)
    assert failures["left"] == 0  # both failures happened, and the loop kept going after them
    assert not daemon.heartbeats.stale()
