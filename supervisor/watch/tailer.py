"""Read the new complete lines of log files, resuming from persisted cursors.

A cursor is (inode, offset, line_no): `offset` is always the start of the
first line not yet handed out, so a daemon that restarts from a saved cursor
neither repeats nor skips a line. The caller saves the cursor only after it
has processed the lines (ideally in the same transaction as what it derived).

The file is opened afresh on every read: on NFS the open revalidates cached
attributes (close-to-open consistency), so `fstat` sees the real size. The
previous descriptor is kept until the next read so that, when the path now
names another inode (rotation) or nothing (deletion), the rest of the old
file can still be drained before moving on.

Partial last lines are held back until their newline arrives. A partial line
that has not grown for `flush_partial_after_s` is emitted anyway, because a
dying job's last words (or a tqdm bar that redraws with `\r` only) may never
get a newline; if the line grows later, the continuation becomes a new line.
"""

from __future__ import annotations

import errno
import os
import stat
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import structlog

from supervisor.watch.lines import (
    MAX_LINE_CHARS,
    Line,
    LineBatch,
    collapse_cr_bytes,
    normalise_chunk,
    normalise_line,
)

log = structlog.get_logger(__name__)

READ_SIZE = 4 * 1024 * 1024
HEAD_BYTES = 128  # enough to tell a rewritten log (timestamps, a banner) from the one read
MAX_LINE_BYTES = MAX_LINE_CHARS - 128  # leaves room for the marker under the normaliser's own cap


@dataclass(frozen=True, slots=True)
class FileCursor:
    """Where reading resumes: `offset` is the start of the first unread line, `line_no` lines were read."""

    inode: int
    offset: int
    line_no: int


class CursorStore(Protocol):
    """Persistence for cursors (the daemon implements it on SQLite)."""

    def load(self, path: str) -> FileCursor | None: ...

    def save(self, path: str, cursor: FileCursor) -> None: ...


class MemoryCursorStore:
    """A CursorStore for tests and one-shot tools."""

    def __init__(self) -> None:
        self.cursors: dict[str, FileCursor] = {}

    def load(self, path: str) -> FileCursor | None:
        return self.cursors.get(path)

    def save(self, path: str, cursor: FileCursor) -> None:
        self.cursors[path] = cursor


@dataclass(slots=True)
class RawChunk:
    """Complete lines as read (raw mode): for a matcher that prefilters bytes and normalises only hits.

    Over-long lines are already cut, with the `…[truncated N bytes]` marker before their newline.
    """

    first_line: int
    data: bytes = b""  # every line ends with b"\n"
    n_lines: int = 0

    def __len__(self) -> int:
        return self.n_lines

    def extend(self, other: RawChunk) -> None:
        self.data += other.data
        self.n_lines += other.n_lines


Batch = LineBatch | RawChunk


def _extend(batch: Batch, other: Batch) -> None:
    if isinstance(batch, RawChunk) and isinstance(other, RawChunk):
        batch.extend(other)
    elif isinstance(batch, LineBatch) and isinstance(other, LineBatch):
        batch.extend(other)
    else:  # pragma: no cover - one Tailer never mixes modes
        raise TypeError("mixed batch kinds")


@dataclass(slots=True)
class TailResult:
    """What one read found; across a rotation `batches` holds the old file's tail, then the new file."""

    path: str
    cursor: FileCursor | None  # None: the file does not exist and never did for us
    batches: list[LineBatch] = field(default_factory=list)  # normalised lines (default mode)
    raw: list[RawChunk] = field(default_factory=list)  # raw mode: complete lines as bytes
    events: list[str] = field(default_factory=list)  # "rotated", "truncated", "deleted", "missing", "flushed"
    more: bool = False  # stopped at max_bytes: call again

    @property
    def n_lines(self) -> int:
        return sum(len(b) for b in self.batches) + sum(c.n_lines for c in self.raw)

    def _add(self, batch: Batch, *, always: bool = False) -> None:
        if isinstance(batch, RawChunk):
            if batch.n_lines or always:
                self.raw.append(batch)
        elif batch.texts or always:
            self.batches.append(batch)

    def lines(self) -> Iterator[tuple[int, Line]]:
        """(line number, line); line numbers restart at 1 in a rotated-in file."""
        for batch in self.batches:
            yield from batch


@dataclass(slots=True)
class _Partial:
    """An unfinished line being accumulated in memory (bounded), valid for one (inode, offset)."""

    inode: int
    offset: int  # where the line starts (== the persisted cursor offset)
    scan_pos: int  # file position up to which bytes were consumed into `buf`
    buf: bytes
    dropped: int  # bytes cut from an over-long line
    grew_at: float


@dataclass(slots=True)
class _Held:
    fd: int
    inode: int


class Tailer:
    """Reads new complete lines for any number of paths; pure apart from file reads (no threads)."""

    def __init__(
        self,
        *,
        read_size: int = READ_SIZE,
        max_line_bytes: int = MAX_LINE_BYTES,
        flush_partial_after_s: float | None = 5.0,
        clock: Callable[[], float] = time.monotonic,
        raw: bool = False,
    ) -> None:
        """raw=True: hand out complete lines as bytes (`TailResult.raw`); the caller normalises."""
        self.raw = raw
        self.read_size = read_size
        self.max_line_bytes = max_line_bytes
        self.flush_partial_after_s = flush_partial_after_s
        self.clock = clock
        self._partial: dict[str, _Partial] = {}
        self._held: dict[str, _Held] = {}
        # The first bytes each file had when it was read from its start: a file truncated and written
        # again past our offset between two reads (NeMo RL truncates ray-driver.log for each attempt) is
        # noticed by its head, not by its size, and read again from the start instead of losing lines.
        self._heads: dict[str, bytes] = {}

    def forget(self, path: str | Path) -> None:
        """Stop tracking a path (run finished): closes the held descriptor."""
        key = str(path)
        self._partial.pop(key, None)
        self._heads.pop(key, None)
        held = self._held.pop(key, None)
        if held is not None:
            os.close(held.fd)

    def close(self) -> None:
        for key in list(self._held):
            self.forget(key)

    def pending_partials(self) -> list[str]:
        """Paths holding an unfinished last line: worth a `read` on a timer so a stale one gets flushed."""
        return [k for k, p in self._partial.items() if p.buf or p.dropped]

    def partial_text(self, path: str | Path) -> str | None:
        """The unfinished last line as it would be emitted now, without consuming it.

        A tqdm bar redraws with `\r` and no newline for its whole life; this lets progress be read
        from it while it runs.
        """
        p = self._partial.get(str(path))
        if p is None or not (p.buf or p.dropped):
            return None
        return normalise_line(p.buf).text

    def read(
        self,
        path: str | Path,
        cursor: FileCursor | None,
        max_bytes: int | None = None,
        *,
        flush: bool = False,
    ) -> TailResult:
        """New lines since `cursor` (None: from the start of the file), and the cursor to save after them.

        flush=True also emits an unfinished last line now (the job ended: no newline is coming).
        """
        key = str(path)
        budget = max_bytes if max_bytes is not None else self.read_size
        result = TailResult(key, cursor)
        try:
            # O_NONBLOCK: a FIFO in the log dir (ray.sub's tee pipe) must not block the daemon
            fd = os.open(key, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
        except OSError as exc:
            if exc.errno not in (errno.ENOENT, errno.ENOTDIR):
                raise
            fd = -1
        try:
            st = os.fstat(fd) if fd >= 0 else None
            if st is not None and not stat.S_ISREG(st.st_mode):
                raise IsADirectoryError(errno.EISDIR, "not a regular file", key)
            held = self._held.get(key)
            if held is None and cursor is not None and (st is None or st.st_ino != cursor.inode):
                held = self._find_rotated(key, cursor.inode)
            if (
                cursor is not None
                and held is not None
                and held.inode == cursor.inode
                and (st is None or st.st_ino != cursor.inode)
            ):
                # the path moved on (rotated or deleted): finish the old file through the held descriptor
                old = self._drain(key, held.fd, cursor, os.fstat(held.fd).st_size, final=True)
                result._add(old.batch)
                result.cursor = old.cursor
                if old.more:
                    result.more = True
                    return result
                self._drop_held(key)
                result.events.append("deleted" if st is None else "rotated")
                cursor = None if st is None else FileCursor(st.st_ino, 0, 0)
                if st is None:
                    result.cursor = old.cursor
                    return result
            if st is None or fd < 0:
                if cursor is not None and "deleted" not in result.events:
                    result.events.append("missing")
                return result
            if cursor is None:
                cursor = FileCursor(st.st_ino, 0, 0)
            elif st.st_ino != cursor.inode:
                result.events.append("rotated")
                log.info("log file replaced", path=key, old_inode=cursor.inode, new_inode=st.st_ino)
                cursor = FileCursor(st.st_ino, 0, 0)
            elif st.st_size < cursor.offset or self._rewritten(key, fd, cursor.offset):
                result.events.append("truncated")
                log.info("log file truncated", path=key, size=st.st_size, offset=cursor.offset)
                self._partial.pop(key, None)
                cursor = FileCursor(st.st_ino, 0, 0)
            if cursor.offset == 0 or len(self._heads.get(key, b"")) < HEAD_BYTES:
                self._heads[key] = os.pread(fd, HEAD_BYTES, 0)  # (what matched, now longer)
            part = self._drain(key, fd, cursor, st.st_size, final=flush, budget=budget)
            result._add(part.batch, always=not (result.batches or result.raw))
            result.cursor = part.cursor
            result.more = part.more
            if part.flushed:
                result.events.append("flushed")
            self._hold(key, fd, st.st_ino)
            fd = -1
            return result
        finally:
            if fd >= 0:
                os.close(fd)

    # ---- internals ------------------------------------------------------------------------------------
    def _rewritten(self, key: str, fd: int, offset: int) -> bool:
        """The file's first bytes are no longer the ones it had when read from its start."""
        head = self._heads.get(key)
        if not head or offset <= 0:
            return False
        now = os.pread(fd, min(len(head), offset), 0)
        return now != head[: len(now)]

    def _find_rotated(self, key: str, inode: int) -> _Held | None:
        """After a restart, the file our cursor points into may live on as `name.1`: finish it."""
        path = Path(key)
        try:
            with os.scandir(path.parent) as entries:
                for entry in entries:
                    sibling = entry.name != path.name and entry.name.startswith(path.name)
                    if sibling and entry.inode() == inode:
                        fd = os.open(entry.path, os.O_RDONLY | os.O_CLOEXEC)
                        log.info("resuming rotated log", path=key, rotated_to=entry.path)
                        self._held[key] = _Held(fd, inode)
                        return self._held[key]
        except OSError:
            return None
        return None

    def _hold(self, key: str, fd: int, inode: int) -> None:
        self._drop_held(key)
        self._held[key] = _Held(fd, inode)

    def _drop_held(self, key: str) -> None:
        held = self._held.pop(key, None)
        if held is not None:
            os.close(held.fd)

    def _drain(
        self, key: str, fd: int, cursor: FileCursor, size: int, *, final: bool, budget: int | None = None
    ) -> _Drained:
        """Consume bytes [cursor.offset or the partial's scan position, size) into complete lines."""
        budget = budget if budget is not None else self.read_size
        partial = self._partial.get(key)
        if partial is not None and (partial.inode != cursor.inode or partial.offset != cursor.offset):
            partial = None
            self._partial.pop(key, None)
        pos = partial.scan_pos if partial is not None else cursor.offset
        end = min(size, pos + budget)
        data = os.pread(fd, end - pos, pos) if end > pos else b""
        end = pos + len(data)  # the file may have shrunk between fstat and pread
        more = end < size
        now = self.clock()
        batch: Batch = RawChunk(cursor.line_no + 1) if self.raw else LineBatch(first_line=cursor.line_no + 1)
        flushed = False
        nl = data.rfind(b"\n")
        if nl < 0:
            if partial is None and not data:
                return _Drained(batch, cursor, more, False)
            if partial is None:
                partial = _Partial(cursor.inode, cursor.offset, pos, b"", 0, now)
            if data:
                self._grow(partial, data, now)
            partial.scan_pos = end
            idle = now - partial.grew_at
            too_old = self.flush_partial_after_s is not None and idle >= self.flush_partial_after_s
            if (final and not more) or (too_old and not more and (partial.buf or partial.dropped)):
                if partial.buf or partial.dropped:
                    batch = self._emit(partial.buf, partial.dropped, b"", cursor.line_no + 1)
                    flushed = True
                self._partial.pop(key, None)
                lines = len(batch)
                return _Drained(batch, FileCursor(cursor.inode, end, cursor.line_no + lines), more, flushed)
            self._partial[key] = partial
            return _Drained(batch, cursor, more, False)
        # at least one newline: everything up to it is complete lines
        head = b"" if partial is None else partial.buf
        dropped = 0 if partial is None else partial.dropped
        complete = data[:nl]
        first_nl = complete.find(b"\n")
        first_len = (first_nl if first_nl >= 0 else len(complete)) + len(head)
        if dropped or first_len > self.max_line_bytes or b"\r" in head:
            # the first line was (or is) over-long: build it from the bounded head
            first_tail = complete if first_nl < 0 else complete[:first_nl]
            batch = self._emit(head, dropped, first_tail, cursor.line_no + 1)
            rest = b"" if first_nl < 0 else complete[first_nl + 1 :]
            if first_nl >= 0:
                _extend(batch, self._normalise(rest + b"\n", cursor.line_no + 2))
        else:
            batch = self._normalise(head + complete + b"\n", cursor.line_no + 1)
        self._partial.pop(key, None)
        new_offset = pos + nl + 1
        new_cursor = FileCursor(cursor.inode, new_offset, cursor.line_no + len(batch))
        tail = data[nl + 1 :]
        if tail:
            p = _Partial(cursor.inode, new_offset, new_offset, b"", 0, now)
            self._grow(p, tail, now)
            p.scan_pos = end
            if final and not more:
                extra = self._emit(p.buf, p.dropped, b"", new_cursor.line_no + 1)
                _extend(batch, extra)
                new_cursor = FileCursor(cursor.inode, end, new_cursor.line_no + len(extra))
                return _Drained(batch, new_cursor, more, True)
            self._partial[key] = p
        return _Drained(batch, new_cursor, more, False)

    def _grow(self, partial: _Partial, data: bytes, now: float) -> None:
        """Append to a partial line, keeping memory bounded: collapse tqdm redraws, then cut."""
        partial.grew_at = now
        if partial.dropped:
            partial.dropped += len(data)
            return
        buf = partial.buf + data
        if len(buf) > self.max_line_bytes and b"\r" in buf:
            buf = collapse_cr_bytes(buf)
        if len(buf) > self.max_line_bytes:
            partial.dropped = len(buf) - self.max_line_bytes
            buf = buf[: self.max_line_bytes]
        partial.buf = buf

    def _emit(self, head: bytes, dropped: int, more: bytes, line_no: int) -> Batch:
        """One line from an accumulated head plus the bytes that completed it."""
        if not dropped:
            buf = head + more
            if b"\r" in buf and len(buf) > self.max_line_bytes:
                buf = collapse_cr_bytes(buf)
            if len(buf) > self.max_line_bytes:
                dropped = len(buf) - self.max_line_bytes
                buf = buf[: self.max_line_bytes]
            head = buf
        else:
            dropped += len(more)
        marker = f"…[truncated {dropped} bytes]" if dropped else ""
        if self.raw:
            return RawChunk(line_no, head.replace(b"\n", b" ") + marker.encode() + b"\n", 1)
        batch = normalise_chunk(head + b"\n", line_no)
        if dropped:
            batch.texts[0] = f"{batch.texts[0]}{marker}"
            batch.truncated[0] = batch.truncated.get(0, 0) + dropped
        return batch

    def _normalise(self, data: bytes, first_line: int) -> Batch:
        if self.raw:
            return RawChunk(first_line, data, data.count(b"\n"))
        return normalise_chunk(data, first_line)


@dataclass(slots=True)
class _Drained:
    batch: Batch
    cursor: FileCursor
    more: bool
    flushed: bool


class Follower:
    """A Tailer bound to a CursorStore: `poll` reads, `commit` persists once the caller has used the lines."""

    def __init__(self, store: CursorStore, tailer: Tailer | None = None) -> None:
        self.store = store
        self.tailer = tailer or Tailer()
        self._cursors: dict[str, FileCursor | None] = {}

    def cursor(self, path: str | Path) -> FileCursor | None:
        key = str(path)
        if key not in self._cursors:
            self._cursors[key] = self.store.load(key)
        return self._cursors[key]

    def poll(self, path: str | Path, max_bytes: int | None = None, *, flush: bool = False) -> TailResult:
        return self.tailer.read(path, self.cursor(path), max_bytes, flush=flush)

    def commit(self, result: TailResult, *, persist: bool = True) -> None:
        """Advance past `result`; `persist=False` advances in memory only, for callers that save the
        cursor once the lines' consequences are recorded (see `persist`)."""
        self._cursors[result.path] = result.cursor
        if persist and result.cursor is not None:
            self.store.save(result.path, result.cursor)

    def persist(self, path: str | Path) -> None:
        cursor = self._cursors.get(str(path))
        if cursor is not None:
            self.store.save(str(path), cursor)

    def forget(self, path: str | Path) -> None:
        self._cursors.pop(str(path), None)
        self.tailer.forget(path)
