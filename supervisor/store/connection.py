"""The one way to open the daemon's SQLite file and the one transaction helper every writer uses.

SQLite survives a SIGKILL at any instant, in WAL mode on a local disk and with the rollback journal on a
network filesystem (the journal mode is chosen from the filesystem: store/placement.py). Migrations run under
an exclusive lock file beside the database, so a daemon and a CLI opening a new store at the same moment
migrate it once. A connection may carry a write guard (the daemon's lease): every transaction checks it when
it begins and again just before it commits, so a daemon that lost its lease writes nothing.
"""

from __future__ import annotations

import fcntl
import secrets
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import structlog

from supervisor.store.placement import StorePlan, plan_for
from supervisor.store.schema import MIGRATIONS
from supervisor.watch.fswatch import detect_fs

log = structlog.get_logger(__name__)


class StoreError(Exception):
    """The store could not be read or written (disk full, locked, corrupt)."""


# The statements that change the file. A write outside `transaction` (autocommit: a cursor saved, an outcome
# noted) is its own transaction, so it is checked too: a thawed former leader once saved its log cursors past
# lines whose decisions it could no longer record, and the new leader, reading on from there, never saw them.
_WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE")


class GuardedConnection(sqlite3.Connection):
    """A connection that knows who may write through it: `transaction` calls `write_guard` (if set) when it
    begins and before it commits, and so does every write statement run outside a transaction."""

    write_guard: Callable[[], None] | None = None

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        if self.write_guard is not None and not self.in_transaction and _is_write(sql):
            self.write_guard()
        return super().execute(sql, parameters)

    def executemany(self, sql: str, parameters: Any, /) -> sqlite3.Cursor:
        if self.write_guard is not None and not self.in_transaction and _is_write(sql):
            self.write_guard()
        return super().executemany(sql, parameters)


def _is_write(sql: str) -> bool:
    return sql.lstrip()[:7].upper().startswith(_WRITES)


def store_plan(path: Path) -> StorePlan:
    """How the store at `path` is kept, from the filesystem of its folder (statfs)."""
    fs = detect_fs(path.parent)
    return plan_for(fs.name, fs.shared)


def connect(path: Path, *, plan: StorePlan | None = None) -> sqlite3.Connection:
    """A read-write connection in autocommit mode with the schema brought up to date."""
    path.parent.mkdir(parents=True, exist_ok=True)
    plan = plan or store_plan(path)
    db = sqlite3.connect(
        str(path), isolation_level=None, timeout=10.0, check_same_thread=False, factory=GuardedConnection
    )
    db.row_factory = sqlite3.Row
    db.execute("PRAGMA busy_timeout=10000")
    with setup_lock(path):
        # Changing the journal mode can fail at once with "database is locked" when another process
        # opens the file at the same moment (SQLite skips the busy handler there to avoid a deadlock): so
        # it is set under the same lock as the migration.
        mode = str(db.execute(f"PRAGMA journal_mode={plan.journal_mode}").fetchone()[0]).upper()
        if mode != plan.journal_mode:
            log.warning("store journal mode not changed", wanted=plan.journal_mode, mode=mode, path=str(path))
        migrate_locked(db, path)
    db.execute(f"PRAGMA synchronous={plan.synchronous}")
    db.execute("PRAGMA foreign_keys=ON")
    return db


def set_write_guard(db: sqlite3.Connection, guard: Callable[[], None] | None) -> None:
    """Make every transaction on `db` call `guard` first and before its commit (it raises to refuse)."""
    if not isinstance(db, GuardedConnection):
        raise TypeError("a write guard needs a connection made by store.connection.connect")
    db.write_guard = guard


def _check_guard(db: sqlite3.Connection) -> None:
    guard = getattr(db, "write_guard", None)
    if guard is not None:
        guard()


def connect_readonly(path: Path) -> sqlite3.Connection:
    """A `mode=ro` connection: no migration, no writes, no write lock taken (watchers of a live daemon)."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5.0, check_same_thread=False)
    db.row_factory = sqlite3.Row
    return db


def schema_version(db: sqlite3.Connection) -> int:
    return int(db.execute("PRAGMA user_version").fetchone()[0])


@contextmanager
def setup_lock(path: Path) -> Iterator[None]:
    """An exclusive lock file beside the database serialises setup between processes."""
    if str(path) == ":memory:":
        yield
        return
    with open(f"{path}.migrate-lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def migrate_locked(db: sqlite3.Connection, path: Path) -> None:
    """Apply the migrations this file lacks (the caller holds `setup_lock`)."""
    version = schema_version(db)
    if version > len(MIGRATIONS):
        raise StoreError(f"{path}: schema version {version} is newer than this shepherd ({len(MIGRATIONS)})")
    for i in range(version, len(MIGRATIONS)):
        # One script per migration, its own BEGIN/COMMIT: a crash leaves the old version intact.
        try:
            db.executescript(f"BEGIN IMMEDIATE;\n{MIGRATIONS[i]}\n;PRAGMA user_version = {i + 1};\nCOMMIT;")
        except sqlite3.Error:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise


@contextmanager
def transaction(db: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One IMMEDIATE transaction (all or nothing, even under SIGKILL), or a savepoint inside the caller's.

    The connection must be in autocommit mode (`isolation_level=None`), as `connect` makes it.
    """
    if db.in_transaction:
        name = f"sp_{secrets.token_hex(4)}"
        db.execute(f"SAVEPOINT {name}")
        try:
            yield db
        except BaseException:
            db.execute(f"ROLLBACK TO {name}")
            db.execute(f"RELEASE {name}")
            raise
        else:
            db.execute(f"RELEASE {name}")
        return
    _check_guard(db)
    db.execute("BEGIN IMMEDIATE")
    try:
        yield db
        _check_guard(db)  # the lease may have lapsed while the transaction ran (a SIGSTOP right here)
    except BaseException:
        db.execute("ROLLBACK")
        raise
    else:
        db.execute("COMMIT")
