"""The store: versioned schema, intents before submission, one decision per incident."""

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from supervisor.domain.runs import AttemptState, RunState
from supervisor.store import Store, StoreError
from supervisor.store.schema import MIGRATIONS


def test_schema_is_versioned_and_reopening_is_idempotent(tmp_path: Path) -> None:
    s = Store(tmp_path / "db.sqlite3")
    assert s.schema_version == len(MIGRATIONS)
    s.create_run("r1", "toy", "{}", "/x")
    s.close()
    again = Store(tmp_path / "db.sqlite3")
    assert again.schema_version == len(MIGRATIONS)
    assert again.get_run("r1") is not None


def test_a_newer_schema_is_refused_rather_than_damaged(tmp_path: Path) -> None:
    db = sqlite3.connect(tmp_path / "db.sqlite3")
    db.execute(f"PRAGMA user_version = {len(MIGRATIONS) + 5}")
    db.close()
    with pytest.raises(StoreError, match="newer"):
        Store(tmp_path / "db.sqlite3")


def test_intent_then_submission(tmp_path: Path) -> None:
    s = Store(tmp_path / "db.sqlite3")
    s.create_run("r1", "toy", "{}", "/x")
    a = s.begin_attempt("r1", lambda n: f"shep-r1-a{n}", {"checkpoint": "/ck/step_3"})
    assert a.state is AttemptState.INTENT and a.n == 1 and a.checkpoint == "/ck/step_3"
    assert s.get_run("r1").state is RunState.SUBMITTING  # type: ignore[union-attr]
    assert [x.n for x in s.open_attempts()] == [1]
    s.attempt_submitted("r1", 1, "42")
    assert s.get_attempt("r1", 1).job_id == "42"  # type: ignore[union-attr]
    b = s.begin_attempt("r1", lambda n: f"shep-r1-a{n}", {})
    assert b.n == 2 and b.tag == "shep-r1-a2"


def test_a_signal_only_exit_is_kept_with_its_exit_code(tmp_path: Path) -> None:
    s = Store(tmp_path / "db.sqlite3")
    s.create_run("r1", "toy", "{}", "/x")
    s.begin_attempt("r1", lambda n: f"shep-r1-a{n}", {})
    s.attempt_submitted("r1", 1, "42")
    s.observe_attempt("r1", 1, slurm_state="FAILED", reason=None, nodes="n1", exit_code=0, exit_signal=9)
    s.observe_attempt("r1", 1, slurm_state="FAILED", reason=None, nodes="n1")  # a later poll knows less
    a = s.get_attempt("r1", 1)
    assert a is not None and (a.exit_code, a.exit_signal) == (0, 9)


def test_a_decision_is_recorded_once_per_signature(tmp_path: Path) -> None:
    s = Store(tmp_path / "db.sqlite3")
    s.create_run("r1", "toy", "{}", "/x")
    first = s.record_decision(
        "r1", 1, rule="cuda-oom", action="resume", signature="cuda-oom", reason="r", evidence={}
    )
    again = s.record_decision(
        "r1", 1, rule="cuda-oom", action="resume", signature="cuda-oom", reason="r", evidence={}
    )
    other = s.record_decision(
        "r1", 2, rule="cuda-oom", action="resume", signature="cuda-oom", reason="r", evidence={}
    )
    assert first is not None and again is None and other is not None
    assert len(s.decisions("r1")) == 2


def test_cursors_round_trip(tmp_path: Path) -> None:
    s = Store(tmp_path / "db.sqlite3")
    assert s.load_cursor("/a.log") is None
    s.save_cursor("/a.log", 7, 100, 3)
    s.save_cursor("/a.log", 7, 200, 5)
    assert s.load_cursor("/a.log") == (7, 200, 5)


def test_processes_opening_a_new_store_at_once_each_migrate_it_once(tmp_path: Path) -> None:
    """The daemon and a CLI call can create the store at the same moment (seen in CI: `table progress
    already exists`, then `database is locked` from the switch to WAL); the setup lock makes the others
    wait and find the work done. Several rounds, as one round rarely loses the race."""
    import multiprocessing as mp

    ctx = mp.get_context("fork")
    for round_ in range(20):
        path = tmp_path / f"state-{round_}" / "shepherd.sqlite3"
        start = ctx.Barrier(6)
        procs = [ctx.Process(target=_open_store_after, args=(start, path)) for _ in range(6)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(60)
        assert [p.exitcode for p in procs] == [0] * 6, f"round {round_}"
        store = Store(path)
        assert store.schema_version == len(MIGRATIONS)
        assert store.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        store.close()


def _open_store_after(start: Any, path: Path) -> None:
    start.wait()
    Store(path).close()
