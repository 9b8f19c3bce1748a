"""The lease on a real folder: exclusive takeover, renewal, and fencing of a holder that lapsed or lost it."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from supervisor.lease.files import LeaseFolder, record_name
from supervisor.lease.keeper import Lease, NotLeader, read_lease


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def lease(folder: Path, clock: Clock, pid: int) -> Lease:
    return Lease(folder, ttl_s=10, margin_s=2, renew_every_s=2, host="login", pid=pid, clock=clock)


def test_the_first_daemon_takes_the_lease_and_a_second_stands_by(tmp_path: Path) -> None:
    clock = Clock()
    a, b = lease(tmp_path, clock, 1), lease(tmp_path, clock, 2)
    assert a.try_acquire() is None and a.generation == 1 and a.held
    why = b.try_acquire()
    assert why is not None and "login:1" in why and b.generation is None


def test_a_standby_takes_over_a_silent_holder_after_the_ttl_and_the_old_holder_is_fenced(
    tmp_path: Path,
) -> None:
    clock = Clock()
    a, b = lease(tmp_path, clock, 1), lease(tmp_path, clock, 2)
    assert a.try_acquire() is None
    assert b.try_acquire() is not None
    clock.t += 9.0
    assert b.try_acquire() is not None  # a is still within its ttl
    clock.t += 1.0
    assert b.try_acquire() is None and b.generation == 2
    # The old holder wakes up (SIGCONT): its clock says it lapsed; it may neither write nor act, nor renew.
    with pytest.raises(NotLeader):
        a.guard()
    with pytest.raises(NotLeader):
        a.fence(1.0)
    assert a.lost is not None and not a.renew()
    assert read_lease(tmp_path).generation == 2  # type: ignore[union-attr]


def test_renewing_keeps_the_lease_and_restarts_the_standbys_wait(tmp_path: Path) -> None:
    clock = Clock()
    a, b = lease(tmp_path, clock, 1), lease(tmp_path, clock, 2)
    a.try_acquire()
    b.try_acquire()
    for _ in range(10):
        clock.t += 2.0
        assert a.renew()
        assert b.try_acquire() is not None
    assert a.held and a.generation == 1 and a.seq == 11


def test_a_holder_that_was_taken_over_while_its_clock_stood_still_is_fenced_by_the_renewal(
    tmp_path: Path,
) -> None:
    """A paused VM: the holder's clock did not advance, but another daemon took the next record."""
    frozen, other = Clock(), Clock()
    a = lease(tmp_path, frozen, 1)
    a.try_acquire()
    b = lease(tmp_path, other, 2)
    b.try_acquire()
    other.t += 10.0
    assert b.try_acquire() is None
    assert a.held  # its own clock sees nothing wrong...
    with pytest.raises(NotLeader, match="taken over by login:2"):
        a.fence(1.0)  # ...but creating the next record fails: it steps down
    assert not a.held


def test_a_fence_needs_enough_lease_left_for_the_command(tmp_path: Path) -> None:
    clock = Clock()
    a = lease(tmp_path, clock, 1)
    a.try_acquire()
    a.fence(7.0)  # renews: 8 s of validity
    with pytest.raises(NotLeader):
        a.fence(9.0)


def test_a_clean_release_lets_a_standby_in_at_once(tmp_path: Path) -> None:
    clock = Clock()
    a, b = lease(tmp_path, clock, 1), lease(tmp_path, clock, 2)
    a.try_acquire()
    b.try_acquire()
    a.release()
    assert b.try_acquire() is None and b.generation == 2
    assert not a.held


def test_two_standbys_racing_for_one_takeover_produce_one_holder(tmp_path: Path) -> None:
    clock = Clock()
    a, b, c = lease(tmp_path, clock, 1), lease(tmp_path, clock, 2), lease(tmp_path, clock, 3)
    a.try_acquire()
    b.try_acquire()
    c.try_acquire()
    clock.t += 10.0
    outcomes = [b.try_acquire(), c.try_acquire()]
    assert outcomes.count(None) == 1
    assert [x.generation for x in (b, c) if x.generation is not None] == [2]


def test_a_stale_listing_is_corrected_by_probing_the_next_names(tmp_path: Path) -> None:
    folder = LeaseFolder(tmp_path)
    clock = Clock()
    a = lease(tmp_path, clock, 1)
    a.try_acquire()
    a.renew()
    seq, rec = folder.newest()
    assert seq == 2 and rec is not None and rec.pid == 1
    (tmp_path / record_name(3)).write_text("")  # being written: counts as a renewal by someone
    assert folder.newest() == (3, None)


def test_old_records_are_pruned_behind_the_newest(tmp_path: Path) -> None:
    clock = Clock()
    a = lease(tmp_path, clock, 1)
    a.try_acquire()
    for _ in range(200):
        clock.t += 1.0
        assert a.renew()
    names = sorted(p.name for p in tmp_path.iterdir())
    assert len(names) < 100 and names[-1] == record_name(201)


def test_a_holder_whose_event_loop_is_busy_longer_than_the_ttl_keeps_its_lease(tmp_path: Path) -> None:
    a = Lease(tmp_path, ttl_s=3, margin_s=0.5, renew_every_s=0.1, host="login", pid=1)
    assert a.try_acquire() is None
    a.start_renewing()
    try:
        first = a.seq
        time.sleep(4.5)  # the daemon building its parts, a long synchronous poll: the renewer thread goes on
        assert a.held and a.lost is None and a.seq > first
        a.guard()
    finally:
        a.release()
    rec = read_lease(tmp_path)
    assert rec is not None and rec.released and rec.generation == 1


def test_fencing_while_the_renewer_runs_never_mistakes_its_own_record_for_a_takeover(tmp_path: Path) -> None:
    a = Lease(tmp_path, ttl_s=3, margin_s=0.5, renew_every_s=0.001, host="login", pid=1)
    assert a.try_acquire() is None
    a.start_renewing()
    try:
        for _ in range(300):
            a.fence(0.1)  # renews on this thread, racing the renewer's renewals
        assert a.lost is None and a.generation == 1
    finally:
        a.release()


def test_a_daemon_restarted_after_a_sigkill_takes_over_at_once_from_its_dead_predecessor(
    tmp_path: Path,
) -> None:
    """Same machine, same pid namespace, and the holder's pid is free: no release was written (SIGKILL), but
    nothing can act for it any more, so its successor does not wait out the ttl."""
    import subprocess
    import sys

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # reaped: its pid is free
    clock = Clock()
    killed, restarted = lease(tmp_path, clock, dead.pid), lease(tmp_path, clock, 1_000_000_000)
    assert killed.try_acquire() is None
    assert restarted.try_acquire() is None and restarted.generation == 2


def test_a_live_holder_or_one_recorded_on_another_machine_is_waited_for(tmp_path: Path) -> None:
    import os

    clock = Clock()
    alive = lease(tmp_path, clock, os.getpid())  # this very process: certainly alive
    assert alive.try_acquire() is None
    other = lease(tmp_path, clock, 1_000_000_001)
    assert other.try_acquire() is not None  # waits for the ttl
    elsewhere = lease(tmp_path / "b", clock, 1_000_000_002)
    elsewhere.machine = "another-boot/1"
    assert elsewhere.try_acquire() is None
    successor = lease(tmp_path / "b", clock, 1_000_000_003)
    assert successor.try_acquire() is not None  # pid 1_000_000_002 is free here, but it lived elsewhere
