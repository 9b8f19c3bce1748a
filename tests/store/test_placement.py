"""Where the store lives decides its journal mode; a write guard refuses every transaction once it says no."""

from __future__ import annotations

from pathlib import Path

import pytest

from supervisor.store import Store
from supervisor.store.placement import plan_for


def test_a_network_filesystem_gets_the_rollback_journal_with_full_sync() -> None:
    for fs in ("nfs4", "lustre", "gpfs", "fuse.sshfs"):
        plan = plan_for(fs, shared=True)
        assert (plan.journal_mode, plan.synchronous) == ("DELETE", "FULL"), fs
        assert "lease" in plan.note


def test_a_local_disk_keeps_wal_and_a_tmpfs_is_called_volatile() -> None:
    assert plan_for("ext4", shared=False).journal_mode == "WAL"
    assert "lives and dies with this machine" in plan_for("ext4", shared=False).note
    assert "lost at the next reboot" in plan_for("tmpfs", shared=False).note


class Refuse(Exception):
    pass


def test_a_write_guard_refuses_writes_and_a_lapse_during_a_transaction_rolls_it_back(tmp_path: Path) -> None:
    allowed = [True]

    def guard() -> None:
        if not allowed[0]:
            raise Refuse("not the leader")

    store = Store(tmp_path / "s.sqlite3", write_guard=guard)
    store.create_run("r1", "one", "{}", "/spec")
    allowed[0] = False
    with pytest.raises(Refuse):
        store.create_run("r2", "two", "{}", "/spec")
    allowed[0] = True
    with pytest.raises(Refuse), store.tx() as db:
        db.execute("DELETE FROM runs")
        allowed[0] = False  # the lease lapses while the transaction runs: its commit is refused
    allowed[0] = True
    assert [r.id for r in store.list_runs()] == ["r1"]


def test_a_write_guard_also_refuses_writes_outside_a_transaction_but_never_reads(tmp_path: Path) -> None:
    """A thawed former leader once saved its log cursors (an autocommit write) past lines whose decision it
    could no longer record; the new leader, reading on from there, never saw them."""
    allowed = [True]

    def guard() -> None:
        if not allowed[0]:
            raise Refuse("not the leader")

    store = Store(tmp_path / "s.sqlite3", write_guard=guard)
    store.create_run("r1", "one", "{}", "/spec")
    store.save_cursor("/logs/slurm-1.out", 7, 19, 2)
    allowed[0] = False
    with pytest.raises(Refuse):
        store.save_cursor("/logs/slurm-1.out", 7, 116, 3)
    with pytest.raises(Refuse):
        store.db.execute("  update runs SET state = 'FAILED'")
    assert [r.id for r in store.list_runs()] == ["r1"]  # reading is always allowed
    allowed[0] = True
    row = store.db.execute("SELECT offset FROM cursors WHERE path = ?", ("/logs/slurm-1.out",)).fetchone()
    assert row[0] == 19
