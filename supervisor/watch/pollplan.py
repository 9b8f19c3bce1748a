"""When to look at each polled file, so that watching hundreds of runs on a shared filesystem stays polite.

Every open, stat or folder listing on NFS/Lustre/GPFS is work for the site's metadata server, and a
daemon that looks at every file of every run every 2 s makes hundreds of them per second, forever. This
plan spends at most `ops_per_s` of them, whatever the number of runs, where a change is likely: a file
that changed recently is looked at every `base_s`; a quiet one after half the time it has been quiet
(between `base_s` and `max_s`), so a line written into a file quiet for a minute is seen within 30 s;
folder listings (new worker logs, restart folders, exp dirs) run on their own slower cadence; the paths of
a pending job cost nothing. When the budget cannot pay for that, `load()` says by how much, and the checks
that are due go out earliest-deadline-first (deadline: one interval after falling due), so a hot file
outranks a quiet one and nothing starves.

Pure: paths, times and costs in, the paths to look at out. `fswatch.ChangeSource` does the looking and
reports back (`observed`); reads the daemon makes outside the plan are paid with `charge`.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from typing import Literal

Kind = Literal["file", "progress", "listing"]


@dataclass(frozen=True, slots=True)
class Cadence:
    """How often to look, and what may be spent on looking (operations: opens, stats, listings)."""

    ops_per_s: float = 100.0
    base_s: float = 2.0  # a file that changed at its last check is looked at again after this
    max_s: float = 30.0  # the longest a quiet file waits
    listing_s: float = 10.0  # a folder listing that just changed
    progress_s: float = 10.0  # a progress file (status.json, metrics, TensorBoard) that just changed: its
    # news is a step or a scalar, not a failure line, and it is rewritten every few seconds
    max_listing_s: float = 60.0
    quiet_factor: float = 0.5  # a quiet file's interval: this share of how long it has been quiet
    burst_s: float = 0.25  # how much unspent budget may be saved up (a second's worth would double a peak)

    def __post_init__(self) -> None:
        if not (
            self.ops_per_s > 0
            and 0 < self.base_s <= self.max_s
            and 0 < self.listing_s <= self.max_listing_s
            and 0 < self.progress_s
        ):
            raise ValueError(f"invalid polling cadence: {self}")

    @classmethod
    def scaled(cls, base_s: float, **kw: float) -> Cadence:
        """The default shape around another base interval (2 s: quiet files 30 s, listings 10-60 s)."""
        shape = {
            "max_s": 15 * base_s,
            "listing_s": 5 * base_s,
            "max_listing_s": 30 * base_s,
            "progress_s": 5 * base_s,
        }
        return cls(base_s=base_s, **(shape | kw))

    def bounds(self, kind: Kind) -> tuple[float, float]:
        if kind == "file":
            return (self.base_s, self.max_s)
        if kind == "progress":
            return (self.progress_s, max(self.progress_s, self.max_s))
        return (self.listing_s, self.max_listing_s)


@dataclass(slots=True)
class Target:
    key: str
    owner: Hashable
    kind: Kind
    cost: float
    interval: float
    due: float
    changed_at: float  # the last change seen (or when watching began)
    checked_at: float | None = None
    in_flight: bool = False
    seq: int = 0  # bumped on every reschedule: older heap entries are stale


@dataclass(frozen=True, slots=True)
class PollLoad:
    """What the plan wants and can spend, for the log, `shepherd status` and the metrics."""

    budget_ops_per_s: float
    demand_ops_per_s: float  # checks at their current intervals plus the reads paid with `charge`
    files: int
    active_files: int  # changed at their last check: looked at every base interval
    progress_files: int  # status.json, metrics.jsonl, TensorBoard event files (their own slower cadence)
    listings: int
    paused: int  # targets of pending jobs: not looked at
    lag_s: float  # how late the recent checks went out, on average (0: on time)

    @property
    def covered(self) -> bool:
        return self.demand_ops_per_s <= self.budget_ops_per_s

    @property
    def shortfall_ops_per_s(self) -> float:
        return max(0.0, self.demand_ops_per_s - self.budget_ops_per_s)


@dataclass(slots=True)
class _Bucket:
    """A token bucket: `rate` per second, at most `capacity` saved; charges may run it into debt."""

    rate: float
    capacity: float
    tokens: float
    at: float

    def refill(self, now: float) -> None:
        if now > self.at:
            self.tokens = min(self.capacity, self.tokens + (now - self.at) * self.rate)
            self.at = now


class PollPlan:
    """The schedule of every polled path; see the module docstring."""

    def __init__(self, cadence: Cadence, now: float) -> None:
        self.cadence = cadence
        self.targets: dict[str, Target] = {}
        self.paused_owners: set[Hashable] = set()
        self._waiting: list[tuple[float, int, str]] = []  # (due, seq, key): not due yet
        self._ready: list[tuple[float, int, str]] = []  # (deadline, seq, key): due, waiting for budget
        self._seq = 0
        self.bucket = self._new_bucket(now)
        self._extra_rate = 0.0  # ops paid with `charge`, per second (a one-minute moving average)
        self._extra_at = now
        self._lag = 0.0

    def _new_bucket(self, now: float) -> _Bucket:
        capacity = max(1.0, self.cadence.ops_per_s * self.cadence.burst_s)
        return _Bucket(self.cadence.ops_per_s, capacity, capacity, now)

    # ---- the watched set ------------------------------------------------------------------------------
    def add(self, key: str, owner: Hashable, kind: Kind, now: float, *, cost: float = 1.0) -> None:
        """Watch `key`; its first check is due at once (it reports the path if it exists)."""
        if key in self.targets:
            return
        lo, _ = self.cadence.bounds(kind)
        t = Target(key, owner, kind, cost, lo, now, changed_at=now)
        self.targets[key] = t
        self._schedule(t, now)

    def remove(self, key: str) -> None:
        self.targets.pop(key, None)  # its heap entries go stale

    def remove_owner(self, owner: Hashable) -> None:
        for key in [k for k, t in self.targets.items() if t.owner == owner]:
            self.remove(key)
        self.paused_owners.discard(owner)

    def pause(self, owner: Hashable) -> None:
        """A pending job writes nothing: its paths are not looked at until `resume`."""
        self.paused_owners.add(owner)

    def resume(self, owner: Hashable, now: float) -> None:
        """The job started (or changed state): look at its paths soon, from the base interval."""
        if owner not in self.paused_owners:
            return
        self.paused_owners.discard(owner)
        for t in self.targets.values():
            if t.owner == owner:
                t.interval = self.cadence.bounds(t.kind)[0]
                t.changed_at = now
                if not t.in_flight:
                    self._schedule(t, now)

    def set_cadence(self, cadence: Cadence, now: float) -> None:
        """A settings reload: new intervals apply from each path's next check."""
        self.cadence = cadence
        self.bucket.refill(now)
        fresh = self._new_bucket(now)
        fresh.tokens = min(self.bucket.tokens, fresh.capacity)
        self.bucket = fresh

    # ---- spending -------------------------------------------------------------------------------------
    def take(self, now: float, limit: int | None = None) -> list[str]:
        """The paths to look at now: due ones, earliest deadline first, as far as the budget allows.

        Each is out until `observed` is called for it.
        """
        self._promote(now)
        self.bucket.refill(now)
        out: list[str] = []
        while self._ready and (limit is None or len(out) < limit):
            _deadline, seq, key = self._ready[0]
            t = self.targets.get(key)
            if t is None or t.seq != seq or t.in_flight or t.owner in self.paused_owners:
                heapq.heappop(self._ready)
                continue
            if self.bucket.tokens < min(t.cost, self.bucket.capacity):
                break
            heapq.heappop(self._ready)
            self.bucket.tokens -= t.cost
            t.in_flight = True
            self._lag = 0.9 * self._lag + 0.1 * max(0.0, now - t.due)
            out.append(key)
        return out

    def observed(self, key: str, changed: bool, now: float, *, quiet_since: float | None = None) -> None:
        """A check of `key` came back: a change brings it to the base interval, quiet backs it off.

        `quiet_since`: when the path last changed as far as the check could tell (a first check's mtime), so
        that a file found quiet for an hour starts backed off instead of at the base interval.
        """
        t = self.targets.get(key)
        if t is None:
            return
        t.in_flight = False
        t.checked_at = now
        lo, hi = self.cadence.bounds(t.kind)
        if quiet_since is not None and not changed:
            t.changed_at = min(t.changed_at, quiet_since)
        if changed:
            t.changed_at = now
            t.interval = lo
        else:
            t.interval = min(hi, max(lo, (now - t.changed_at) * self.cadence.quiet_factor))
        if t.owner not in self.paused_owners:
            self._schedule(t, now + t.interval)

    def soon(self, keys: Iterable[str], now: float) -> None:
        """Look at these again at the next chance (something else hinted they changed)."""
        for key in keys:
            t = self.targets.get(key)
            if t is not None and not t.in_flight and t.owner not in self.paused_owners:
                self._schedule(t, now)

    def charge(self, ops: float, now: float) -> None:
        """Pay for operations made outside `take` (reads after a change, a Slurm state change's drain)."""
        if ops <= 0:
            return
        self.bucket.refill(now)
        self.bucket.tokens -= ops
        self._decay_extra(now)
        self._extra_rate += ops / 60.0  # a one-minute moving sum, as a rate

    def next_wake(self, now: float) -> float:
        """When `take` may next return something (inf: nothing is watched)."""
        self._promote(now)
        while self._ready:
            _d, seq, key = self._ready[0]
            t = self.targets.get(key)
            if t is None or t.seq != seq or t.in_flight or t.owner in self.paused_owners:
                heapq.heappop(self._ready)
                continue
            need = min(t.cost, self.bucket.capacity)
            self.bucket.refill(now)
            if self.bucket.tokens >= need:
                return now
            return now + (need - self.bucket.tokens) / self.bucket.rate
        while self._waiting:
            due, seq, key = self._waiting[0]
            t = self.targets.get(key)
            if t is None or t.seq != seq or t.owner in self.paused_owners:
                heapq.heappop(self._waiting)
                continue
            return due
        return math.inf

    # ---- telling ----------------------------------------------------------------------------------------
    def load(self, now: float) -> PollLoad:
        demand = 0.0
        files = active = progress = listings = paused = 0
        for t in self.targets.values():
            if t.owner in self.paused_owners:
                paused += 1
                continue
            lo, _ = self.cadence.bounds(t.kind)
            demand += t.cost / t.interval
            if t.kind == "file":
                files += 1
                active += t.interval <= lo
            elif t.kind == "progress":
                progress += 1
            else:
                listings += 1
        self._decay_extra(now)
        return PollLoad(
            budget_ops_per_s=self.cadence.ops_per_s,
            demand_ops_per_s=demand + self._extra_rate,
            files=files,
            active_files=active,
            progress_files=progress,
            listings=listings,
            paused=paused,
            lag_s=self._lag,
        )

    # ---- internals --------------------------------------------------------------------------------------
    def _schedule(self, t: Target, due: float) -> None:
        self._seq += 1
        t.seq = self._seq
        t.due = due
        heapq.heappush(self._waiting, (due, t.seq, t.key))

    def _promote(self, now: float) -> None:
        """Move what fell due from the waiting heap to the ready heap, keyed by deadline."""
        while self._waiting and self._waiting[0][0] <= now:
            due, seq, key = heapq.heappop(self._waiting)
            t = self.targets.get(key)
            if t is None or t.seq != seq:
                continue
            heapq.heappush(self._ready, (due + t.interval, seq, key))

    def _decay_extra(self, now: float) -> None:
        if now > self._extra_at:
            self._extra_rate *= math.exp(-(now - self._extra_at) / 60.0)
            self._extra_at = now
