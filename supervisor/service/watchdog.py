"""Heartbeats from every daemon loop, turned into systemd's WATCHDOG=1 and STATUS=.

A process that is alive but has one wedged loop (a hung `squeue`, a deadlocked
tailer) is worse than a crash: it looks healthy and supervises nothing. So
WATCHDOG=1 is sent only while *every* registered loop has beaten within its
allowed interval; when one stops, the pings stop, systemd kills and restarts
the daemon after WatchdogSec, and the log says which loop was stuck.

The decision (which loops are stale at time t) is a pure function over plain
records; the async task around it only reads the clock and sends datagrams.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

import anyio
import structlog

from supervisor.service.sdnotify import Notifier, watchdog_interval_s

log = structlog.get_logger(__name__)

Clock = Callable[[], float]


@dataclass(frozen=True)
class LoopState:
    """What the watchdog knows about one loop: its last beat and how long it may be silent."""

    last_beat: float
    max_interval_s: float
    idle_until: float | None = None  # declared idle-but-healthy until this time


@dataclass(frozen=True)
class StaleLoop:
    name: str
    silent_s: float
    allowed_s: float


def stale_loops(loops: Mapping[str, LoopState], now: float) -> list[StaleLoop]:
    """The loops that have not beaten within their allowance at `now`, most overdue first."""
    stale: list[StaleLoop] = []
    for name, st in loops.items():
        silent = now - st.last_beat
        if st.idle_until is not None and now <= st.idle_until:
            continue
        if silent > st.max_interval_s:
            allowed = st.max_interval_s
            if st.idle_until is not None:
                allowed = max(allowed, st.idle_until - st.last_beat)
            stale.append(StaleLoop(name=name, silent_s=silent, allowed_s=allowed))
    stale.sort(key=lambda s: s.silent_s - s.allowed_s, reverse=True)
    return stale


def format_duration(seconds: float) -> str:
    """Compact human durations for a one-line status: 45s, 6m, 2h05m, 3d04h."""
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m"
    if s < 86400:
        return f"{s // 3600}h{(s % 3600) // 60:02d}m"
    return f"{s // 86400}d{(s % 86400) // 3600:02d}h"


@dataclass(frozen=True)
class StatusSummary:
    """Inputs for the one-line STATUS= the daemon shows in `systemctl status`."""

    active: int = 0
    pending: int = 0
    failed: int = 0
    blind_for_s: float | None = None  # Slurm unreachable for this long, None when it answers
    notes: tuple[str, ...] = field(default_factory=tuple)


def format_status(summary: StatusSummary, stuck: list[StaleLoop] | None = None) -> str:
    """One line, most urgent first: stuck loops, blindness, then the run counts."""
    parts: list[str] = []
    if stuck:
        parts.append(_stuck_part(stuck))
    if summary.blind_for_s is not None:
        parts.append(f"blind: slurm unreachable for {format_duration(summary.blind_for_s)}")
    parts.append(f"runs {summary.active} active, {summary.pending} pending, {summary.failed} failed")
    parts.extend(summary.notes)
    return "; ".join(parts)


def _stuck_part(stuck: list[StaleLoop]) -> str:
    return "stuck: " + ", ".join(f"{s.name} silent {format_duration(s.silent_s)}" for s in stuck)


class Heartbeat:
    """A loop's handle: beat() each iteration, idle(s) before a known long wait."""

    def __init__(self, registry: HeartbeatRegistry, name: str) -> None:
        self._registry = registry
        self.name = name

    def beat(self) -> None:
        self._registry.beat(self.name)

    def idle(self, for_s: float) -> None:
        self._registry.idle(self.name, for_s)

    def close(self) -> None:
        self._registry.unregister(self.name)


class HeartbeatRegistry:
    """Thread-safe (loops may beat from worker threads running blocking Slurm calls)."""

    def __init__(self, clock: Clock = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._loops: dict[str, LoopState] = {}

    def register(self, name: str, max_interval_s: float) -> Heartbeat:
        """Start tracking a loop; counts as a beat now. Re-registering replaces the allowance."""
        if not math.isfinite(max_interval_s) or max_interval_s <= 0:
            raise ValueError(f"max_interval_s must be a positive number, got {max_interval_s!r}")
        with self._lock:
            self._loops[name] = LoopState(last_beat=self._clock(), max_interval_s=max_interval_s)
        return Heartbeat(self, name)

    def unregister(self, name: str) -> None:
        """A loop that finished on purpose must not hold the watchdog back."""
        with self._lock:
            self._loops.pop(name, None)

    def beat(self, name: str) -> None:
        with self._lock:
            st = self._loops.get(name)
            if st is None:
                log.warning("heartbeat from unregistered loop", loop=name)
                return
            self._loops[name] = replace(st, last_beat=self._clock(), idle_until=None)

    def beat_if_registered(self, name: str) -> None:
        """A beat from a loop that may run before it is registered (start-up, or driven alone in a test)."""
        if name in self.names:
            self.beat(name)

    def idle(self, name: str, for_s: float) -> None:
        """Healthy without beating for `for_s` from now (e.g. a deliberate long sleep or backoff)."""
        with self._lock:
            st = self._loops.get(name)
            if st is None:
                log.warning("idle from unregistered loop", loop=name)
                return
            now = self._clock()
            self._loops[name] = replace(st, last_beat=now, idle_until=now + for_s)

    def snapshot(self) -> dict[str, LoopState]:
        with self._lock:
            return dict(self._loops)

    def stale(self) -> list[StaleLoop]:
        return stale_loops(self.snapshot(), self._clock())

    @property
    def names(self) -> list[str]:
        with self._lock:
            return sorted(self._loops)


StatusSource = Callable[[], StatusSummary | str]

DEFAULT_STATUS_INTERVAL_S = 10.0


class Watchdog:
    """The I/O side: pings systemd while every loop is healthy and keeps STATUS= current."""

    def __init__(
        self,
        registry: HeartbeatRegistry,
        notifier: Notifier,
        *,
        interval_s: float | None = None,
        status: StatusSource | None = None,
        status_interval_s: float = DEFAULT_STATUS_INTERVAL_S,
    ) -> None:
        self.registry = registry
        self.notifier = notifier
        # None = systemd asked for no watchdog; STATUS= is still kept current.
        self.interval_s = interval_s if interval_s is not None else watchdog_interval_s()
        self._status = status
        self._status_interval_s = status_interval_s
        self._last_status: str | None = None
        self._stuck_names: tuple[str, ...] = ()

    def status_line(self, stuck: list[StaleLoop]) -> str | None:
        if self._status is None:
            return format_status(StatusSummary(), stuck) if stuck else None
        try:
            value = self._status()
        except Exception:
            log.exception("status callback failed")
            return None
        if isinstance(value, StatusSummary):
            return format_status(value, stuck)
        return f"{_stuck_part(stuck)}; {value}" if stuck else value

    def tick(self) -> bool:
        """One round: returns whether WATCHDOG=1 was sent (all loops healthy and a watchdog is wanted)."""
        stuck = self.registry.stale()
        names = tuple(s.name for s in stuck)
        if names != self._stuck_names:
            if stuck:
                log.error(
                    "loop stuck: withholding WATCHDOG=1 so systemd restarts the daemon",
                    stuck=[
                        {"loop": s.name, "silent_s": round(s.silent_s, 1), "allowed_s": s.allowed_s}
                        for s in stuck
                    ],
                )
            else:
                log.info("all loops beating again", loops=self.registry.names)
            self._stuck_names = names
        line = self.status_line(stuck)
        if line is not None and line != self._last_status:
            if self.notifier.status(line):
                self._last_status = line
        if stuck or self.interval_s is None:
            return False
        return self.notifier.watchdog()

    async def run(self) -> None:
        """Run until cancelled; cadence is WATCHDOG_USEC/2 (or the status interval when no watchdog)."""
        period = self.interval_s if self.interval_s is not None else self._status_interval_s
        period = min(period, self._status_interval_s)
        log.info("watchdog started", ping_every_s=self.interval_s, loops=self.registry.names)
        while True:
            self.tick()
            await anyio.sleep(period)
