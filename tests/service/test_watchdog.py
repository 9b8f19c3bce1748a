"""WATCHDOG=1 flows only while every loop beats; a stuck loop stops it and is named."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
import pytest
import structlog

from supervisor.service.sdnotify import Notifier
from supervisor.service.watchdog import (
    HeartbeatRegistry,
    LoopState,
    StaleLoop,
    StatusSummary,
    Watchdog,
    format_duration,
    format_status,
    stale_loops,
)

if TYPE_CHECKING:
    from .conftest import NotifyReceiver


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class RecordingNotifier(Notifier):
    def __init__(self) -> None:
        super().__init__({})
        self.sent: list[dict[str, str | int]] = []

    def send(self, **fields: str | int) -> bool:
        self.sent.append(fields)
        return True


# --- the pure core -------------------------------------------------------------------------------


def test_loops_within_their_interval_are_healthy() -> None:
    loops = {"slurm": LoopState(last_beat=100.0, max_interval_s=30.0)}
    assert stale_loops(loops, now=130.0) == []


def test_a_loop_silent_longer_than_allowed_is_stale() -> None:
    loops = {
        "slurm": LoopState(last_beat=100.0, max_interval_s=30.0),
        "tail": LoopState(last_beat=125.0, max_interval_s=10.0),
        "slack": LoopState(last_beat=139.0, max_interval_s=10.0),
    }
    assert stale_loops(loops, now=140.0) == [  # most overdue first
        StaleLoop("slurm", silent_s=40.0, allowed_s=30.0),
        StaleLoop("tail", silent_s=15.0, allowed_s=10.0),
    ]


def test_a_loop_declared_idle_is_healthy_until_its_idle_deadline() -> None:
    loops = {"backoff": LoopState(last_beat=100.0, max_interval_s=10.0, idle_until=400.0)}
    assert stale_loops(loops, now=399.0) == []
    assert stale_loops(loops, now=401.0) == [StaleLoop("backoff", silent_s=301.0, allowed_s=300.0)]


def test_registry_tracks_beats_idle_and_unregister() -> None:
    clock = FakeClock()
    reg = HeartbeatRegistry(clock)
    poll = reg.register("slurm-poll", max_interval_s=30)
    tail = reg.register("tailer", max_interval_s=5)
    clock.now += 10
    poll.beat()
    assert [s.name for s in reg.stale()] == ["tailer"]
    tail.idle(60)
    assert reg.stale() == []
    clock.now += 61
    assert [s.name for s in reg.stale()] == ["slurm-poll", "tailer"]
    tail.close()
    poll.beat()
    assert reg.stale() == []


def test_register_rejects_a_non_positive_interval() -> None:
    with pytest.raises(ValueError):
        HeartbeatRegistry().register("x", 0)


def test_status_line_puts_stuck_and_blind_first() -> None:
    summary = StatusSummary(active=3, pending=1, failed=2, blind_for_s=360)
    assert format_status(summary) == "blind: slurm unreachable for 6m; runs 3 active, 1 pending, 2 failed"
    stuck = [StaleLoop("tailer", silent_s=95, allowed_s=30)]
    assert format_status(StatusSummary(active=1), stuck) == (
        "stuck: tailer silent 1m; runs 1 active, 0 pending, 0 failed"
    )


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0, "0s"), (45.9, "45s"), (360, "6m"), (7500, "2h05m"), (3 * 86400 + 4 * 3600, "3d04h")],
)
def test_format_duration(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


def test_tick_pings_only_while_all_loops_beat_and_logs_the_stuck_one() -> None:
    clock = FakeClock()
    reg = HeartbeatRegistry(clock)
    reg.register("slurm-poll", 30)
    tail = reg.register("tailer", 30)
    n = RecordingNotifier()
    wd = Watchdog(reg, n, interval_s=15, status=lambda: StatusSummary(active=2))
    assert wd.tick() is True
    clock.now += 31
    tail.beat()
    with structlog.testing.capture_logs() as logs:
        assert wd.tick() is False
    assert any(e["log_level"] == "error" and e["stuck"][0]["loop"] == "slurm-poll" for e in logs)
    assert {"STATUS": "stuck: slurm-poll silent 31s; runs 2 active, 0 pending, 0 failed"} in n.sent
    reg.beat("slurm-poll")
    assert wd.tick() is True
    assert n.sent[-1] == {"WATCHDOG": 1}


def test_status_is_sent_only_when_it_changes() -> None:
    reg = HeartbeatRegistry(FakeClock())
    n = RecordingNotifier()
    counts = iter([1, 1, 2])
    wd = Watchdog(reg, n, interval_s=None, status=lambda: f"runs {next(counts)} active")
    for _ in range(3):
        assert wd.tick() is False  # no WATCHDOG_USEC: status only
    assert n.sent == [{"STATUS": "runs 1 active"}, {"STATUS": "runs 2 active"}]


def test_a_failing_status_callback_does_not_stop_the_pings() -> None:
    reg = HeartbeatRegistry(FakeClock())
    n = RecordingNotifier()

    def broken() -> str:
        raise RuntimeError("store locked")

    wd = Watchdog(reg, n, interval_s=1, status=broken)
    assert wd.tick() is True
    assert n.sent == [{"WATCHDOG": 1}]


# --- over a real socket, with real time ----------------------------------------------------------


@pytest.mark.anyio
async def test_watchdog_keeps_pinging_while_loops_beat_and_stops_when_one_is_stuck(
    notify_socket: NotifyReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WATCHDOG_USEC", "40000")  # ping every 20 ms
    monkeypatch.delenv("WATCHDOG_PID", raising=False)
    reg = HeartbeatRegistry()
    notifier = Notifier({"NOTIFY_SOCKET": notify_socket.address})
    wd = Watchdog(reg, notifier, status=lambda: StatusSummary(active=1, blind_for_s=360))
    assert wd.interval_s == pytest.approx(0.02)
    wedge = anyio.Event()

    async def worker(name: str, stuck_on: anyio.Event | None) -> None:
        hb = reg.register(name, max_interval_s=0.3)
        while True:
            if stuck_on is not None and stuck_on.is_set():
                await anyio.sleep_forever()  # wedged: alive, no progress
            hb.beat()
            await anyio.sleep(0.005)

    async with anyio.create_task_group() as tg:
        tg.start_soon(worker, "slurm-poll", wedge)
        tg.start_soon(worker, "tailer", None)
        tg.start_soon(wd.run)
        assert await anyio.to_thread.run_sync(lambda: notify_socket.wait_for(lambda m: len(m) >= 5))
        first = notify_socket.snapshot()
        assert first[0] == {"STATUS": "blind: slurm unreachable for 6m; runs 1 active, 0 pending, 0 failed"}
        assert all(m == {"WATCHDOG": "1"} for m in first[1:5])

        wedge.set()
        with anyio.fail_after(10):
            while [s.name for s in reg.stale()] != ["slurm-poll"]:  # noqa: ASYNC110 - polling a clock
                await anyio.sleep(0.01)
        await anyio.sleep(0.1)  # let a ping computed just before the wedge land
        stuck_status = await anyio.to_thread.run_sync(
            lambda: notify_socket.wait_for(lambda m: any(x.get("STATUS", "").startswith("stuck:") for x in m))
        )
        assert stuck_status
        notify_socket.clear()
        await anyio.sleep(0.3)  # 15 ping periods
        assert notify_socket.count("WATCHDOG") == 0
        tg.cancel_scope.cancel()
