"""Where the store may live and in which journal mode, decided from the filesystem under it (a pure function).

SQLite's WAL mode keeps its index in shared memory (`-shm`, mmap) that only processes on one host can share,
and sqlite.org says it "does not work over a network filesystem"; the rollback journal works there as long as
one process writes at a time ("How To Corrupt An SQLite Database File": broken POSIX locks plus concurrent
writers). So on a network filesystem (NFS, Lustre, GPFS, BeeGFS, CIFS, any FUSE) the store uses the rollback
journal (`DELETE`) with `synchronous=FULL`, every commit on the server before it returns, and the root's lease
(supervisor/lease) makes the active daemon the one writer. On a local disk it keeps WAL (readers never wait)
but then lives and dies with that machine: `doctor` says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# Local filesystems whose content does not survive a reboot.
VOLATILE = frozenset({"tmpfs", "ramfs", "devtmpfs"})


@dataclass(frozen=True, slots=True)
class StorePlan:
    journal_mode: Literal["WAL", "DELETE"]
    synchronous: Literal["NORMAL", "FULL"]
    fs: str
    shared: bool
    note: str


def plan_for(fs: str, shared: bool) -> StorePlan:
    """The journal mode and sync level for a store on filesystem `fs` (shared: other hosts see it)."""
    if shared:
        return StorePlan(
            "DELETE",
            "FULL",
            fs,
            True,
            f"on {fs}, a network filesystem: rollback journal, every commit synced; the lease keeps one "
            "writer; any login node can take over",
        )
    note = f"on {fs}, a local filesystem: WAL; the state lives and dies with this machine"
    if fs in VOLATILE:
        note = f"on {fs}: lost at the next reboot; put the root on a disk that survives (your shared home)"
    return StorePlan("WAL", "NORMAL", fs, False, note)
