"""The lease folder on disk: read the newest record, and create the next one exclusively.

Every change of the lease is a new file named by its sequence number, made with `link(2)` of a fully written
temporary file: the create is decided by the server of a network filesystem (NFS, Lustre, GPFS, FUSE), so two
processes on two hosts can never both create the same number, even where byte-range locks are broken or absent
(NFS without a lock manager, many FUSE filesystems). That is why no `fcntl`/`flock` lock is used here. A lost
reply to a `link` that did succeed (NFS retransmits it and gets EEXIST) is recognised by the temporary file's
link count, the classic NFS-safe locking recipe (open(2), "O_EXCL").
"""

from __future__ import annotations

import os
import re
import secrets
from pathlib import Path

from supervisor.lease.model import LeaseRecord

_NAME = re.compile(r"^(\d{12})\.lease$")
KEEP = 64  # records kept behind the newest: plenty for people and tests to read the recent history


def record_name(seq: int) -> str:
    return f"{seq:012d}.lease"


class LeaseFolder:
    def __init__(self, path: Path) -> None:
        self.path = path

    def newest(self) -> tuple[int, LeaseRecord | None]:
        """(highest seq, its record). The listing may be stale on NFS, so names above it are probed by opening
        them (an open revalidates); a record still being written or unreadable gives (seq, None)."""
        seq = 0
        try:
            with os.scandir(self.path) as entries:
                for e in entries:
                    m = _NAME.match(e.name)
                    if m:
                        seq = max(seq, int(m.group(1)))
        except FileNotFoundError:
            return 0, None
        text = self._read(seq) if seq else None
        while True:
            nxt = self._read(seq + 1)
            if nxt is None:
                break
            seq, text = seq + 1, nxt
        return seq, (LeaseRecord.from_json(seq, text) if text else None)

    def read(self, seq: int) -> LeaseRecord | None:
        text = self._read(seq)
        return LeaseRecord.from_json(seq, text) if text else None

    def _read(self, seq: int) -> str | None:
        try:
            with open(self.path / record_name(seq), encoding="utf-8") as fh:
                return fh.read() or " "  # exists but empty: being written
        except FileNotFoundError:
            return None
        except UnicodeDecodeError:
            return " "

    def create(self, record: LeaseRecord) -> bool:
        """Create the file for `record.seq` with its content; False if it already existed (someone else won).

        OSError other than "exists" (ESTALE, EIO, ENOSPC) propagates: the caller did not renew.
        """
        self.path.mkdir(parents=True, exist_ok=True)
        tmp = self.path / f".tmp-{record.seq}-{secrets.token_hex(6)}"
        target = self.path / record_name(record.seq)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            os.write(fd, record.to_json().encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(tmp, target)
            return True
        except FileExistsError:
            # A retransmitted link whose first try succeeded also says EEXIST: then tmp has two names.
            return os.stat(tmp).st_nlink == 2
        finally:
            try:
                os.unlink(tmp)
            except OSError:
                pass

    def prune(self, newest: int) -> None:
        """Remove records more than KEEP behind `newest` and leftover temporary files (best effort)."""
        try:
            with os.scandir(self.path) as entries:
                names = [e.name for e in entries]
        except OSError:
            return
        for name in names:
            m = _NAME.match(name)
            old = m is not None and int(m.group(1)) < newest - KEEP
            if old or (name.startswith(".tmp-") and _tmp_seq(name) < newest - KEEP):
                try:
                    os.unlink(self.path / name)
                except OSError:
                    pass


def _tmp_seq(name: str) -> int:
    try:
        return int(name.split("-")[1])
    except (IndexError, ValueError):
        return 0
