"""The lease of one process: stand by until it is ours, renew it, and fence actions and store writes on it.

A holder may act only while its own clock says the lease is valid (`model.valid_until`), and a lease that
lapsed is lost for good: a holder that was stopped, partitioned or suspended past its lease never renews it,
it steps down (the daemon exits and its service manager starts a fresh standby). Before each `sbatch`,
`scancel` and hold the fence does more than look at the clock: it renews, i.e. creates the next record
exclusively, which fails if any other process took the lease over, even when this host's clock did not advance
(a paused VM).

Renewal runs on a thread of its own, started the moment the lease is won: the daemon's event loop does
synchronous work (building its parts, opening and migrating the store, a busy poll on a loaded login node)
that can outlast a short lease, and a holder whose loop is briefly busy must not lose the lease for it. The
thread only keeps the lease; whether this process may *act* is still decided at each action (`fence`,
`guard`), and a SIGSTOP or a suspend stops the thread with the rest of the process, so a frozen holder still
lapses. A wedged event loop is the watchdog's to catch (service/watchdog.py), not the lease's.
"""

from __future__ import annotations

import os
import secrets
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path

import anyio
import structlog

from supervisor.lease.files import LeaseFolder
from supervisor.lease.model import Claim, LeaseRecord, Seen, Wait, may_act, standby_step, valid_until

log = structlog.get_logger(__name__)


def boottime() -> float:
    """Monotonic and counting suspend (CLOCK_MONOTONIC stops while a machine sleeps; a lease must not)."""
    return time.clock_gettime(time.CLOCK_BOOTTIME)


def machine_identity() -> str:
    """This boot of this machine and our pid namespace: where a pid names one process ("" if unknown)."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        return f"{boot}/{os.stat('/proc/self/ns/pid').st_ino}"
    except OSError:
        return ""


def holder_gone(record: LeaseRecord | None, machine: str, own_pid: int) -> bool:
    """Whether the holder is certainly dead: recorded on this boot and pid namespace, and its pid is free.

    Only then can a restarted daemon take over without waiting out the ttl (a SIGKILL leaves no release). A
    reused pid, another host, another container or an unknown machine all read as alive: waiting is safe.
    """
    if record is None or record.released or not machine or record.machine != machine or record.pid == own_pid:
        return False
    try:
        os.kill(record.pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False  # it exists (EPERM: another user's process)
    return False


class NotLeader(Exception):
    """This process does not hold the root's lease (any more): it must not act or write."""


class Lease:
    def __init__(
        self,
        folder: Path,
        *,
        ttl_s: float,
        margin_s: float,
        renew_every_s: float,
        host: str | None = None,
        pid: int | None = None,
        clock: Callable[[], float] = boottime,
        wall: Callable[[], float] = time.time,
    ) -> None:
        if ttl_s <= margin_s:
            raise ValueError("the lease ttl must be longer than its safety margin")
        self.folder = LeaseFolder(folder)
        self.ttl_s = ttl_s
        self.margin_s = margin_s
        self.renew_every_s = renew_every_s
        self.host = host or socket.gethostname()
        self.pid = pid if pid is not None else os.getpid()
        self.nonce = secrets.token_hex(8)
        self.machine = machine_identity()
        self.clock = clock
        self.wall = wall
        self.generation: int | None = None
        self.seq = 0
        self.until = 0.0
        self.acquired_at = 0.0
        self.lost: str | None = None
        self._renewed = 0.0
        self._seen: Seen | None = None
        # renew() runs on the renewer thread and in fence() on the event loop: one at a time, or the second
        # would find its own record at seq+1 and take it for another holder's.
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None

    # ---- standby ------------------------------------------------------------------------------------
    def try_acquire(self) -> str | None:
        """One look at the lease: None if it is ours now, else why we wait (who holds it)."""
        newest_seq, newest = self.folder.newest()
        gone = holder_gone(newest, self.machine, self.pid)
        step = standby_step(newest, newest_seq, self._seen, self.clock(), self.ttl_s, holder_gone=gone)
        if isinstance(step, Wait):
            self._seen = step.seen
            return step.why
        if self._claim(step):
            return None
        self._seen = Seen(step.seq, self.clock())  # someone else won that number: watch it from now
        return f"lost the race for seq {step.seq} to another daemon"

    async def acquire(self, on_wait: Callable[[str], None] = lambda why: None) -> None:
        """Stand by until the lease is ours (reporting why we wait whenever that changes)."""
        said = None
        while True:
            try:
                why = self.try_acquire()
            except OSError as exc:
                why = f"cannot read or write the lease folder {self.folder.path}: {exc}"
            if why is None:
                return
            if why.split(";")[0] != said:
                said = why.split(";")[0]
                log.info("standing by", lease=why)
            on_wait(why)
            await anyio.sleep(min(1.0, self.renew_every_s))

    def _claim(self, step: Claim) -> bool:
        started = self.clock()
        now = self.wall()
        fresh = step.generation != self.generation
        record = LeaseRecord(
            seq=step.seq,
            generation=step.generation,
            host=self.host,
            pid=self.pid,
            nonce=self.nonce,
            ttl_s=self.ttl_s,
            renewed_at=now,
            acquired_at=now if fresh else self.acquired_at,
            machine=self.machine,
        )
        if not self.folder.create(record):
            return False
        self.generation, self.seq, self.acquired_at = step.generation, step.seq, record.acquired_at
        self.until = valid_until(started, self.ttl_s, self.margin_s)
        self._renewed = started
        self.lost = None
        if fresh:
            log.info("lease acquired", generation=self.generation, seq=self.seq, host=self.host, pid=self.pid)
        return True

    # ---- holding ------------------------------------------------------------------------------------
    @property
    def held(self) -> bool:
        return self.generation is not None and self.lost is None and may_act(self.until, self.clock())

    def renew(self) -> bool:
        """Create the next record while still valid; a lapse or a record taken by another process loses the
        lease for good. False when not renewed (lost, or an I/O error to retry before the lease lapses)."""
        with self._lock:
            return self._renew()

    def _renew(self) -> bool:
        if self.generation is None or self.lost is not None:
            return False
        if not may_act(self.until, self.clock()):
            self._lose(
                f"the lease lapsed (not renewed for {self.clock() - self._renewed:.1f} s: stopped or stalled)"
            )
            return False
        try:
            won = self._claim(Claim(self.seq + 1, self.generation))
        except OSError as exc:
            log.warning("lease renewal failed; retrying", error=str(exc))
            return False
        if not won:
            taker = self.folder.read(self.seq + 1)
            who = f"{taker.holder} (generation {taker.generation})" if taker else "another daemon"
            self._lose(f"the lease was taken over by {who}")
            return False
        if self.seq % 16 == 0:
            self.folder.prune(self.seq)
        return True

    def _lose(self, why: str) -> None:
        if self.lost is None:
            self.lost = why
            log.error("lease lost: stepping down without acting", reason=why, generation=self.generation)

    def guard(self) -> None:
        """The store's write guard: raises NotLeader unless the lease is held right now (no I/O)."""
        if not self.held:
            if self.lost is None and self.generation is not None:
                self._lose("the lease lapsed before a write")
            raise NotLeader(self.lost or "this process does not hold the lease")

    def fence(self, need_s: float) -> None:
        """Before sbatch/scancel/hold: renew now (proving no one else took over) and be valid for `need_s`."""
        if not self.renew() or not may_act(self.until, self.clock(), need_s):
            raise NotLeader(self.lost or "could not renew the lease before acting")

    def start_renewing(self) -> None:
        """Renew every `renew_every_s` on the renewer thread until the lease is lost or released."""
        if self._renewer is not None and self._renewer.is_alive():
            return
        self._stop.clear()
        self._renewer = threading.Thread(target=self._renew_loop, name="lease-renewer", daemon=True)
        self._renewer.start()

    def stop_renewing(self, wait: bool = True) -> None:
        self._stop.set()
        if wait and self._renewer is not None and self._renewer is not threading.current_thread():
            self._renewer.join(timeout=2 * self.ttl_s)
        self._renewer = None

    def _renew_loop(self) -> None:
        while not self._stop.wait(min(self.renew_every_s, 0.25)) and self.lost is None:
            if self.clock() - self._renewed >= self.renew_every_s:
                self.renew()
            self._check_lapse()

    def _check_lapse(self) -> None:
        if self.lost is None and self.generation is not None and not may_act(self.until, self.clock()):
            self._lose(f"the lease lapsed (not renewed for {self.clock() - self._renewed:.1f} s)")

    async def keep(self, on_lost: Callable[[str], None]) -> None:
        """Keep the lease renewed (the renewer thread) until it is lost, then call `on_lost` once."""
        self.start_renewing()
        while (why := self.lost) is None:
            await anyio.sleep(0.1)  # reads two fields: no I/O on the event loop
            self._check_lapse()
        self.stop_renewing(wait=False)  # it stops by itself once lost; never block the loop on it
        on_lost(why)

    def release(self) -> None:
        """On a clean stop: a released record, so a standby takes over at once instead of after the ttl."""
        self.stop_renewing()
        with self._lock:
            self._release()

    def _release(self) -> None:
        if not self.held or self.generation is None:
            return
        now = self.wall()
        rec = LeaseRecord(
            self.seq + 1,
            self.generation,
            self.host,
            self.pid,
            self.nonce,
            self.ttl_s,
            now,
            self.acquired_at,
            True,
            self.machine,
        )
        try:
            if self.folder.create(rec):
                self.seq += 1
                log.info("lease released", generation=self.generation)
        except OSError as exc:
            log.warning("could not release the lease; a standby takes over after the ttl", error=str(exc))
        self.lost = "released"


def read_lease(folder: Path) -> LeaseRecord | None:
    """The newest record, for `shepherd status` and `doctor` (reads only)."""
    return LeaseFolder(folder).newest()[1]
