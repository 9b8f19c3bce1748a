"""The lease as data and its decisions as pure functions, so takeover and fencing are tested without files.

Time here is two clocks on purpose. Whether a standby may take over, and whether a holder may still act, are
measured on each process's own monotonic clock (it neither jumps with NTP nor differs between hosts); the
wall clock in a record is only for people (`shepherd status`: renewed 3 s ago). A standby never trusts
another host's wall clock: it takes over only after it has itself watched the newest record stay unchanged
for `ttl_s`.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    """One file of the lease folder: `seq` orders them; `generation` names one holder's tenure."""

    seq: int
    generation: int
    host: str
    pid: int
    nonce: str
    ttl_s: float
    renewed_at: float  # wall clock, for display only
    acquired_at: float  # wall clock, when this generation began
    released: bool = False
    machine: str = ""  # this boot of this machine and the holder's pid namespace ("": unknown)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, seq: int, text: str) -> LeaseRecord | None:
        """The record in a file named `seq`, or None when it is not (yet) whole JSON of the right shape."""
        try:
            data: Any = json.loads(text)
            rec = cls(
                seq=int(data["seq"]),
                generation=int(data["generation"]),
                host=str(data["host"]),
                pid=int(data["pid"]),
                nonce=str(data["nonce"]),
                ttl_s=float(data["ttl_s"]),
                renewed_at=float(data["renewed_at"]),
                acquired_at=float(data["acquired_at"]),
                released=bool(data.get("released", False)),
                machine=str(data.get("machine", "")),
            )
        except (ValueError, KeyError, TypeError):
            return None
        return rec if rec.seq == seq else None

    @property
    def holder(self) -> str:
        return f"{self.host}:{self.pid}"


@dataclass(frozen=True, slots=True)
class Seen:
    """What a standby last saw: the newest seq and when (its own monotonic clock) it first saw that seq."""

    seq: int
    since: float


@dataclass(frozen=True, slots=True)
class Claim:
    """Create the file `seq` for `generation` (an exclusive create: at most one process wins it)."""

    seq: int
    generation: int


@dataclass(frozen=True, slots=True)
class Wait:
    """Stay standby; `seen` is what to remember, `why` says who holds the lease for the log and status."""

    seen: Seen
    why: str


def standby_step(
    newest: LeaseRecord | None,
    newest_seq: int,
    seen: Seen | None,
    now: float,
    ttl_s: float,
    *,
    holder_gone: bool = False,
) -> Claim | Wait:
    """What a standby does after looking at the lease folder once.

    `newest_seq` is the highest file found (0: none), `newest` its record (None: no file, or one still being
    written or unreadable, which counts as a live renewal). A released lease, an empty folder, or a holder
    known to be gone (`holder_gone`: its process no longer exists on this very machine, e.g. a daemon
    SIGKILLed and restarted by systemd) is taken at once; otherwise the standby waits until the same seq
    has been the newest for `ttl_s` of its own clock (using the longer of its own and the holder's ttl).
    """
    if newest_seq == 0:
        return Claim(1, 1)
    generation = newest.generation if newest is not None else newest_seq
    if newest is not None and (newest.released or holder_gone):
        return Claim(newest_seq + 1, generation + 1)
    if seen is None or seen.seq != newest_seq:
        seen = Seen(newest_seq, now)
    wait_for = max(ttl_s, newest.ttl_s if newest is not None else ttl_s)
    if now - seen.since >= wait_for:
        return Claim(newest_seq + 1, generation + 1)
    holder = (
        f"{newest.holder} (generation {newest.generation})" if newest is not None else f"seq {newest_seq}"
    )
    return Wait(
        seen, f"held by {holder}; takeover if not renewed within {wait_for - (now - seen.since):.0f} s"
    )


def valid_until(claim_started: float, ttl_s: float, margin_s: float) -> float:
    """Until when (monotonic) a holder may act after a renewal whose create began at `claim_started`.

    A standby starts its ttl no earlier than the create finished, so the holder stops `margin_s` before any
    standby can have taken over, whatever the scheduling delays between the two.
    """
    return claim_started + ttl_s - margin_s


def may_act(until: float, now: float, need_s: float = 0.0) -> bool:
    """Whether a holder valid until `until` may start something that can take `need_s` to finish."""
    return now + need_s < until


def describe(record: LeaseRecord | None, now_wall: float) -> str:
    """One line for people: who holds the lease and how fresh it is (by the wall clock: display only)."""
    if record is None:
        return "lease: no daemon has held it yet"
    ago = max(0.0, now_wall - record.renewed_at)
    who = f"{record.holder}, generation {record.generation}"
    if record.released:
        return f"lease: free (released by {who} {ago:.0f} s ago)"
    if ago > record.ttl_s:
        return f"lease: expired (last held by {who}, renewed {ago:.0f} s ago; a standby takes over)"
    return f"lease: held by {who}, renewed {ago:.0f} s ago (ttl {record.ttl_s:.0f} s)"


def looks_held(record: LeaseRecord | None, now_wall: float) -> bool:
    """Whether a live process seems to hold the lease, by the wall clock of its last renewal. A hint for the
    CLI's fast path only: a holder that looks silent is confirmed gone by watching its records, never by
    comparing clocks (`standby_step`)."""
    return record is not None and not record.released and now_wall - record.renewed_at <= record.ttl_s
