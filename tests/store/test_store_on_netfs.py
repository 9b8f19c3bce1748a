"""The store and the lease on a network filesystem: two login nodes, one writer, nothing lost when one is
wiped.

The kernel here has no NFS (see tests/support/netfs.py), so a FUSE filesystem of our own stands in: one
backing folder is the "server", each mount of it a "login node" with its own kernel caches. Each test says
which NFS behaviour it imitates.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from supervisor.lease import Lease, NotLeader
from supervisor.store import Store
from supervisor.store.connection import store_plan
from tests.support.netfs import ESTALE_FILE, fuse_available, mounted

pytestmark = [
    pytest.mark.fuse,  # under SHEPHERD_REQUIRE_SLURM=1 (CI) a missing FUSE fails instead of skipping
    pytest.mark.skipif(fuse_available() is not None, reason=f"no FUSE: {fuse_available()}"),
]


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def server(tmp_path: Path) -> Path:
    return tmp_path / "server"


@pytest.fixture
def node_a(tmp_path: Path, server: Path) -> Iterator[Path]:
    with mounted(server, tmp_path / "login1") as m:
        yield m


@pytest.fixture
def node_b(tmp_path: Path, server: Path) -> Iterator[Path]:
    with mounted(server, tmp_path / "login2", cache_s=3.0) as m:
        yield m


def lease_on(node: Path, clock: Clock, pid: int) -> Lease:
    return Lease(
        node / "state" / "lease", ttl_s=10, margin_s=2, renew_every_s=2, host=node.name, pid=pid, clock=clock
    )


def test_on_a_network_filesystem_the_store_keeps_a_rollback_journal_and_syncs_every_commit(
    node_a: Path, tmp_path: Path
) -> None:
    """Imitates: a store in an NFS home, where WAL's shared memory cannot work across hosts."""
    plan = store_plan(node_a / "state" / "shepherd.sqlite3")
    assert plan.shared and plan.journal_mode == "DELETE" and plan.synchronous == "FULL"
    store = Store(node_a / "state" / "shepherd.sqlite3")
    assert store.db.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    assert store.db.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    local = Store(tmp_path / "local" / "shepherd.sqlite3")
    assert local.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_the_stand_in_shares_no_locks_between_login_nodes(node_a: Path, node_b: Path) -> None:
    """Imitates: NFS without a working lock manager. Two writers both get SQLite's write lock at once, so the
    store's safety there rests on the lease alone (the next test)."""
    Store(node_a / "state" / "shepherd.sqlite3").close()
    a = sqlite3.connect(node_a / "state" / "shepherd.sqlite3", isolation_level=None, timeout=0.5)
    b = sqlite3.connect(node_b / "state" / "shepherd.sqlite3", isolation_level=None, timeout=0.5)
    a.execute("BEGIN IMMEDIATE")
    b.execute("BEGIN IMMEDIATE")  # on a local disk this would wait and fail with "database is locked"
    a.execute("ROLLBACK")
    b.execute("ROLLBACK")


def test_one_writer_across_login_nodes_and_nothing_lost_when_the_leaders_node_is_wiped(
    node_a: Path, node_b: Path, tmp_path: Path, server: Path
) -> None:
    """Imitates: two login nodes on one NFS home; the leader's node is rebooted and wiped for maintenance."""
    clock = Clock()
    lease_a, lease_b = lease_on(node_a, clock, 1), lease_on(node_b, clock, 2)
    assert lease_a.try_acquire() is None
    assert lease_b.try_acquire() is not None  # standby
    store_a = Store(node_a / "state" / "shepherd.sqlite3", write_guard=lease_a.guard)
    store_a.create_run("r1", "one", "{}", "/spec")
    standby_store = Store(node_b / "state" / "shepherd.sqlite3", write_guard=lease_b.guard)
    with pytest.raises(NotLeader):
        standby_store.create_run("r2", "two", "{}", "/spec")  # the standby never writes
    standby_store.close()
    for _ in range(3):
        clock.t += 2
        assert lease_a.renew()
        store_a.create_run(f"r-{clock.t:.0f}", "more", "{}", "/spec")
    store_a.close()
    # login1 is wiped: its mount, caches and process are gone; only the server's copy remains.
    lease_a_clock_stops = clock.t
    clock.t += 10
    assert lease_b.try_acquire() is not None  # it first sees the newest record now...
    clock.t += 10
    assert lease_b.try_acquire() is None and lease_b.generation == 2  # ...and takes over a ttl later
    # The new leader opens the store only now, as the daemon does (it builds after the lease is its own): an
    # open revalidates the client's caches (NFS's close-to-open). Where locks do not work, a connection kept
    # from before the takeover could go on reading stale pages.
    store_b = Store(node_b / "state" / "shepherd.sqlite3", write_guard=lease_b.guard)
    assert {r.id for r in store_b.list_runs()} == {"r1", "r-1002", "r-1004", "r-1006"}
    store_b.create_run("r2", "two", "{}", "/spec")
    assert lease_a_clock_stops < clock.t and not lease_a.held
    with pytest.raises(NotLeader):
        lease_a.guard()
    assert (server / "state" / "shepherd.sqlite3").exists()


def test_a_standby_blinded_by_its_cache_cannot_take_a_number_the_holder_already_has(
    node_a: Path, node_b: Path
) -> None:
    """Imitates: the standby's stale view (negative lookups cached) of a record the holder just created."""
    clock_a, clock_b = Clock(), Clock()
    lease_a, lease_b = lease_on(node_a, clock_a, 1), lease_on(node_b, clock_b, 2)
    assert lease_a.try_acquire() is None
    assert lease_b.try_acquire() is not None
    assert not (node_b / "state" / "lease" / "000000000002.lease").exists()  # cache the name as missing
    clock_a.t += 2
    assert lease_a.renew()  # seq 2, created through login1
    assert not (node_b / "state" / "lease" / "000000000002.lease").exists()  # still hidden on login2
    clock_b.t += 11  # login2 believes seq 1 has been silent for 11 s
    assert lease_b.try_acquire() is not None  # its create of seq 2 is refused by the server
    assert lease_a.held and lease_b.generation is None


def test_estale_on_the_lease_stops_the_holder_writing_before_anyone_can_take_over(
    node_a: Path, node_b: Path, server: Path
) -> None:
    """Imitates: ESTALE from the NFS server (failover, remount): renewals fail, so the holder stops writing
    when its lease lapses by its own clock, and the standby cannot read the lease either."""
    clock = Clock()
    lease_a, lease_b = lease_on(node_a, clock, 1), lease_on(node_b, clock, 2)
    assert lease_a.try_acquire() is None
    store_a = Store(node_a / "state" / "shepherd.sqlite3", write_guard=lease_a.guard)
    (server / ESTALE_FILE).write_text("lease\n")
    clock.t += 2
    assert not lease_a.renew()  # ESTALE: not renewed, retried later
    store_a.create_run("r1", "one", "{}", "/spec")  # still within its lease
    clock.t += 6.5
    with pytest.raises(NotLeader):
        store_a.create_run("r2", "two", "{}", "/spec")
    with pytest.raises(OSError):
        lease_b.try_acquire()
    (server / ESTALE_FILE).unlink()
    assert lease_b.try_acquire() is not None  # sees seq 1 now; takes over only after a ttl of its own
