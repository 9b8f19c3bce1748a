"""The one way to open the daemon's SQLite file and the one transaction helper every writer uses.

SQLite in WAL mode survives a SIGKILL at any instant. Migrations run under an exclusive lock file beside
the database, so a daemon and a CLI opening a new store at the same moment migrate it once.
"""

from __future__ import annotations

import fcntl
import secrets
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from supervisor.store.schema import MIGRATIONS


class StoreError(Exception):
    """The store could not be read or written (disk full, locked, corrupt)."""


def connect(path: Path) -> sqlite3.Connection:
    """A read-write connection in autocommit mode with the schema brought up to date."""
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(str(path), isolation_level=None, timeout=10.0, check_same_thread=False)
    db.row_factory = sqlite3.Row
    db.execute("PRAGMA busy_timeout=10000")
    with setup_lock(path):
        # Turning a new file to WAL can fail at once with "database is locked" when another process
        # opens it at the same moment (SQLite skips the busy handler there to avoid a deadlock): so
        # the journal mode is set under the same lock as the migration.
        db.execute("PRAGMA journal_mode=WAL")
        migrate_locked(db, path)
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("PRAGMA foreign_keys=ON")
    return db


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
    db.execute("BEGIN IMMEDIATE")
    try:
        yield db
    except BaseException:
        db.execute("ROLLBACK")
        raise
    else:
        db.execute("COMMIT")
