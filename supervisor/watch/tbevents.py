"""Incremental TensorBoard event-file reading without TensorFlow or tensorboard.

tensorboard's EventAccumulator re-reads whole files and is ~10x slower than
parsing the TFRecord framing ourselves; the supervisor only needs scalars, so
a small protobuf wire decoder for the few fields below is enough (numbers
checked against tensorboard/compat/proto event_pb2, summary_pb2, tensor_pb2):

    Event:        wall_time=1 double, step=2 int64, summary=5, session_log=7
    Summary:      value=1 (repeated Value)
    Value:        tag=1 string, simple_value=2 float, tensor=8 TensorProto
    TensorProto:  dtype=1, tensor_shape=2, tensor_content=4, float_val=5, double_val=6,
                  int_val=7, int64_val=10, half_val=13
    SessionLog:   status=1 (START=1: a writer restarted with purge_step)

A record is `uint64 length | uint32 masked crc32c(length) | data | uint32
masked crc32c(data)`. The length CRC (8 bytes) is always checked, which
catches torn or garbage framing cheaply; checking the data CRC as well is
optional (off by default) because crc32c in pure Python is the slow part.
"""

from __future__ import annotations

import os
import re
import stat
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import structlog

from supervisor.domain.observations import MetricEvent
from supervisor.domain.trainer_files import EXP_DIR_RE, TENSORBOARD_DIR
from supervisor.watch.metric_names import canonical

log = structlog.get_logger(__name__)

HEADER = 12
FOOTER = 4
MAX_RECORD = 256 * 1024 * 1024  # anything larger is corruption, not a scalar
# A scalar event is ~100 bytes; images, histograms and graphs can be megabytes. A record over this is stepped
# over unread (its framing is sound), so a huge one can neither fill memory nor, being longer than one read,
# stall the file forever.
MAX_DECODED_RECORD = 4 * 1024 * 1024

# tensorflow DataType enum values (types.proto)
DT_FLOAT, DT_DOUBLE, DT_INT32, DT_INT64, DT_BFLOAT16, DT_HALF = 1, 2, 3, 9, 14, 19

# ---- crc32c (Castagnoli), table-driven; fine for 8-byte headers, slow for bulk data ---------------------
_POLY = 0x82F63B78
_TABLE = []
for _i in range(256):
    _c = _i
    for _ in range(8):
        _c = (_c >> 1) ^ _POLY if _c & 1 else _c >> 1
    _TABLE.append(_c)
del _i, _c


def crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    table = _TABLE
    for b in data:
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc32c(data: bytes) -> int:
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


# ---- TFRecord framing -----------------------------------------------------------------------------------
def split_records(buf: bytes, verify_data: bool = False) -> tuple[list[bytes], int, str]:
    """Whole records at the start of `buf`: (payloads, bytes consumed, problem or "").

    A partial record at the end is left for the next read; a CRC mismatch stops
    the scan at the bad record (problem "bad length crc" / "bad data crc").
    """
    out: list[bytes] = []
    pos = 0
    n = len(buf)
    unpack_q = struct.Struct("<Q").unpack_from
    unpack_i = struct.Struct("<I").unpack_from
    good_headers: set[bytes] = set()
    while n - pos >= HEADER:
        header = buf[pos : pos + HEADER]
        if header not in good_headers:  # lengths repeat, so each distinct header is checked once
            (length_crc,) = unpack_i(header, 8)
            if masked_crc32c(header[:8]) != length_crc or unpack_q(header)[0] > MAX_RECORD:
                return out, pos, "bad length crc"
            if len(good_headers) < 4096:
                good_headers.add(header)
        (length,) = unpack_q(header)
        if length > MAX_DECODED_RECORD:
            return out, pos, "record too large"
        end = pos + HEADER + length + FOOTER
        if end > n:
            break
        data = buf[pos + HEADER : pos + HEADER + length]
        if verify_data:
            (data_crc,) = unpack_i(buf, end - FOOTER)
            if masked_crc32c(data) != data_crc:
                return out, pos, "bad data crc"
        out.append(data)
        pos = end
    return out, pos, ""


_NONZERO = re.compile(rb"[^\x00]")


def find_next_header(buf: bytes, start: int) -> int | None:
    """The first offset >= `start` holding a whole record header whose length crc is valid, else None.

    Used to get past corrupt bytes. Records are < 4 GiB, so the length's upper four bytes are zero: only
    offsets followed by four zero bytes are checked, and runs of zeros (an NFS hole) are jumped over.
    """
    unpack_q = struct.Struct("<Q").unpack_from
    unpack_i = struct.Struct("<I").unpack_from
    n = len(buf)
    p = start
    while True:
        i = buf.find(b"\x00\x00\x00\x00", p + 4)
        if i < 0 or i - 4 + HEADER > n:
            return None
        p = i - 4
        if not any(buf[p : p + 8]):  # length 0: never an event; skip to the end of the zeros
            m = _NONZERO.search(buf, p)
            if m is None:
                return None
            p = max(p + 1, m.start() - 7)
            continue
        (length,) = unpack_q(buf, p)
        if length <= MAX_RECORD and masked_crc32c(buf[p : p + 8]) == unpack_i(buf, p + 8)[0]:
            return p
        p += 1


def frame_record(data: bytes) -> bytes:
    """The inverse of split_records (tests and tools write event files with it)."""
    length = struct.pack("<Q", len(data))
    return length + struct.pack("<I", masked_crc32c(length)) + data + struct.pack("<I", masked_crc32c(data))


# ---- protobuf wire decoding -----------------------------------------------------------------------------
def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def _fields(buf: bytes) -> list[tuple[int, int, int | bytes]]:
    """(field number, wire type, value) for every field; LEN values are bytes, fixed ones raw ints."""
    out: list[tuple[int, int, int | bytes]] = []
    pos = 0
    n = len(buf)
    while pos < n:
        key, pos = _varint(buf, pos)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, pos = _varint(buf, pos)
            out.append((num, wt, v))
        elif wt == 1:
            out.append((num, wt, buf[pos : pos + 8]))
            pos += 8
        elif wt == 2:
            ln, pos = _varint(buf, pos)
            out.append((num, wt, buf[pos : pos + ln]))
            pos += ln
        elif wt == 5:
            out.append((num, wt, buf[pos : pos + 4]))
            pos += 4
        else:
            raise ValueError(f"unsupported wire type {wt}")
    if pos != n:
        raise ValueError("truncated message")
    return out


def _signed64(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


@dataclass(frozen=True, slots=True)
class Scalar:
    tag: str
    step: int
    value: float
    wall_time: float


@dataclass(slots=True)
class DecodedEvent:
    wall_time: float = 0.0
    step: int = 0
    scalars: list[tuple[str, float]] = field(default_factory=list)
    session_start: bool = False


def _tensor_scalar(buf: bytes) -> float | None:
    """The value of a one-element numeric TensorProto, else None (images, histograms, text...)."""
    dtype = 0
    elements = 1
    content = b""
    packed: dict[int, bytes] = {}
    loose: dict[int, list[int | bytes]] = {}
    for num, wt, v in _fields(buf):
        if num == 1 and isinstance(v, int):
            dtype = v
        elif num == 2 and isinstance(v, bytes):
            for dnum, _dwt, dim in _fields(v):
                if dnum == 2 and isinstance(dim, bytes):  # TensorShapeProto.dim
                    for snum, _swt, size in _fields(dim):
                        if snum == 1 and isinstance(size, int):
                            elements *= _signed64(size)
        elif num == 4 and isinstance(v, bytes):
            content = v
        elif wt == 2 and isinstance(v, bytes):
            packed[num] = v
        else:
            loose.setdefault(num, []).append(v)
    if elements != 1:
        return None
    if content:
        fmt = {DT_FLOAT: "<f", DT_DOUBLE: "<d", DT_HALF: "<e", DT_INT32: "<i", DT_INT64: "<q"}.get(dtype)
        if dtype == DT_BFLOAT16 and len(content) >= 2:
            return float(struct.unpack("<f", b"\x00\x00" + content[:2])[0])
        if fmt is None or len(content) < struct.calcsize(fmt):
            return None
        return float(struct.unpack_from(fmt, content)[0])
    if dtype == DT_FLOAT:
        raw = packed.get(5) or _first_bytes(loose.get(5))
        return float(struct.unpack_from("<f", raw)[0]) if raw and len(raw) >= 4 else None
    if dtype == DT_DOUBLE:
        raw = packed.get(6) or _first_bytes(loose.get(6))
        return float(struct.unpack_from("<d", raw)[0]) if raw and len(raw) >= 8 else None
    if dtype in (DT_HALF, DT_BFLOAT16):
        bits = _first_varint(packed.get(13), loose.get(13))
        if bits is None:
            return None
        if dtype == DT_HALF:
            return float(struct.unpack("<e", struct.pack("<H", bits & 0xFFFF))[0])
        return float(struct.unpack("<f", struct.pack("<I", (bits & 0xFFFF) << 16))[0])
    if dtype in (DT_INT32, DT_INT64):
        num = 7 if dtype == DT_INT32 else 10
        bits = _first_varint(packed.get(num), loose.get(num))
        return float(_signed64(bits)) if bits is not None else None
    return None


def _first_bytes(values: list[int | bytes] | None) -> bytes | None:
    if values and isinstance(values[0], bytes):
        return values[0]
    return None


def _first_varint(packed: bytes | None, loose: list[int | bytes] | None) -> int | None:
    if packed:
        return _varint(packed, 0)[0]
    if loose and isinstance(loose[0], int):
        return loose[0]
    return None


# add_scalar's event, whole: wall_time, step, summary { value { tag, simple_value } } with short lengths
_SIMPLE_RE = re.compile(
    rb"\x09(.{8})\x10([\x80-\xff]{0,9}[\x00-\x7f])\x2a([\x00-\x7f])\x0a([\x00-\x7f])\x0a([\x00-\x7f])(.*)\x15(.{4})",
    re.DOTALL,
)
_D = struct.Struct("<d")
_F = struct.Struct("<f")


def _decode_simple(buf: bytes) -> DecodedEvent | None:
    """The common event with one regex and a few length checks; None means "not this shape"."""
    m = _SIMPLE_RE.fullmatch(buf)
    if m is None:
        return None
    wall, step_bytes, summary_len, value_len, tag_len, tag, value = m.groups()
    n = len(tag)
    if tag_len[0] != n or value_len[0] != n + 7 or summary_len[0] != n + 9:
        return None
    step = step_bytes[0] if len(step_bytes) == 1 else _signed64(_varint(step_bytes, 0)[0])
    scalar = (tag.decode("utf-8", "replace"), float(_F.unpack(value)[0]))
    return DecodedEvent(_D.unpack(wall)[0], step, [scalar])


def decode_event(buf: bytes) -> DecodedEvent:
    """The scalar content of one serialized `Event`; raises ValueError on malformed protobuf."""
    fast = _decode_simple(buf)
    if fast is not None:
        return fast
    ev = DecodedEvent()
    for num, _wt, v in _fields(buf):
        if num == 1 and isinstance(v, bytes):
            ev.wall_time = struct.unpack("<d", v)[0]
        elif num == 2 and isinstance(v, int):
            ev.step = _signed64(v)
        elif num == 5 and isinstance(v, bytes):
            for snum, _swt, value in _fields(v):
                if snum == 1 and isinstance(value, bytes):
                    scalar = _decode_value(value)
                    if scalar is not None:
                        ev.scalars.append(scalar)
        elif num == 7 and isinstance(v, bytes):
            for lnum, _lwt, status in _fields(v):
                if lnum == 1 and status == 1:
                    ev.session_start = True
    return ev


def _decode_value(buf: bytes) -> tuple[str, float] | None:
    tag = ""
    simple: float | None = None
    tensor: bytes | None = None
    for num, _wt, v in _fields(buf):
        if num == 1 and isinstance(v, bytes):
            tag = v.decode("utf-8", "replace")
        elif num == 2 and isinstance(v, bytes):
            simple = struct.unpack("<f", v)[0]
        elif num == 8 and isinstance(v, bytes):
            tensor = v
    if simple is not None:
        return tag, float(simple)
    if tensor is not None:
        value = _tensor_scalar(tensor)
        if value is not None:
            return tag, value
    return None


# ---- incremental file reader ----------------------------------------------------------------------------
@dataclass(slots=True)
class TBReadResult:
    scalars: list[Scalar]
    offset: int
    records: int
    restarted_at_step: int | None = None  # a SessionLog START (purge_step): older steps >= this are void
    problem: str = ""


class EventFileReader:
    """One event file read from a saved offset; `read` returns only what is new since the last call.

    `inode` is the file's identity saved with the offset: a different inode (the file was replaced) or a
    size below the offset (truncated) restarts at 0. A partial record at EOF waits for the rest. A record
    whose data crc is bad (checked with `verify_data`) is skipped at once, with a log line: its framing is
    sound. A bad length crc cannot be stepped over (the length is not to be trusted) and may be a writer
    mid-flush on NFS, so it is waited on for `resync_after_s`; then the bytes up to the next valid header
    are skipped, with a log line.
    """

    def __init__(
        self,
        path: str | Path,
        offset: int = 0,
        *,
        verify_data: bool = False,
        inode: int | None = None,
        resync_after_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.path = Path(path)
        self.offset = offset
        self.verify_data = verify_data
        self.inode = inode
        self.resync_after_s = resync_after_s
        self.clock = clock
        self._warned = False
        self._bad: tuple[int, float] | None = None  # (file offset, first seen) of a bad length crc
        self._size = 0  # the file's size at the last read

    def read(self, max_bytes: int = 64 * 1024 * 1024) -> TBReadResult:
        try:
            # O_NONBLOCK: a FIFO named like an event file must not block the daemon
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
        except FileNotFoundError:
            return TBReadResult([], self.offset, 0, problem="missing")
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                return TBReadResult([], self.offset, 0, problem="not a regular file")
            self._size = st.st_size
            if (self.inode is not None and st.st_ino != self.inode) or st.st_size < self.offset:
                self.offset = 0  # replaced or truncated: event files are append-only, so start over
            self.inode = st.st_ino
            want = min(st.st_size - self.offset, max_bytes)
            buf = os.pread(fd, want, self.offset) if want > 0 else b""
        finally:
            os.close(fd)
        return self._consume(buf)

    def _consume(self, buf: bytes) -> TBReadResult:
        result = TBReadResult([], self.offset, 0)
        pos = 0
        waiting = ""
        while True:
            chunk = buf[pos:] if pos else buf  # a copy only after a skipped record: rare
            records, used, problem = split_records(chunk, self.verify_data)
            for data in records:
                result.records += 1
                try:
                    ev = decode_event(data)
                except (ValueError, IndexError, struct.error) as exc:
                    log.warning("undecodable tensorboard event skipped", path=str(self.path), error=str(exc))
                    continue
                if ev.session_start:
                    result.restarted_at_step = ev.step
                for tag, value in ev.scalars:
                    result.scalars.append(Scalar(tag, ev.step, value, ev.wall_time))
            pos += used
            result.problem = result.problem or problem
            skip = self._skip(chunk, used, problem, self.offset + pos) if problem else 0
            if not skip:
                waiting = problem
                break
            pos += skip
        self.offset += pos
        result.offset = self.offset
        if waiting and not self._warned:
            self._warned = True  # a writer mid-flush on NFS can look like this: retried next read
            log.warning(
                "tensorboard record framing mismatch",
                path=str(self.path),
                offset=self.offset,
                problem=waiting,
            )
        elif not waiting:
            self._warned = False
            self._bad = None
        return result

    def _skip(self, buf: bytes, pos: int, problem: str, at: int) -> int:
        """How many bytes of the bad record at `pos` to step over now; 0: wait for the next read."""
        if problem == "record too large":
            (length,) = struct.unpack_from("<Q", buf, pos)
            size = HEADER + int(length) + FOOTER
            if at + size > self._size:
                return 0  # not all written yet: step over it once it is
            log.warning(
                "tensorboard record over the size limit skipped unread",
                path=str(self.path),
                offset=at,
                bytes=size,
                limit=MAX_DECODED_RECORD,
            )
            return size
        if problem == "bad data crc":
            (length,) = struct.unpack_from("<Q", buf, pos)
            size = HEADER + int(length) + FOOTER
            log.warning(
                "tensorboard record with a bad data crc skipped", path=str(self.path), offset=at, bytes=size
            )
            return size
        now = self.clock()
        if self._bad is None or self._bad[0] != at:
            self._bad = (at, now)
        if now - self._bad[1] < self.resync_after_s:
            return 0
        nxt = find_next_header(buf, pos + 1)
        # Without a valid header, every offset that could hold a whole one is garbage: keep only the tail.
        skip = (nxt if nxt is not None else len(buf) - HEADER + 1) - pos
        if skip > 0:
            self._bad = None
            log.warning(
                "corrupt tensorboard bytes skipped",
                path=str(self.path),
                offset=at,
                bytes=skip,
                resynced=nxt is not None,
            )
        return max(skip, 0)


def exp_dirs(log_dir: str | Path) -> list[Path]:
    """NeMo RL's layout: `<log_dir>/exp_NNN/`, one per launch, oldest first (by number, not by name)."""
    root = Path(log_dir)
    try:
        found = [(int(m.group(1)), p) for p in root.iterdir() if (m := EXP_DIR_RE.match(p.name))]
        found = [(n, p) for n, p in found if p.is_dir()]
    except OSError:
        return []
    return [p for _n, p in sorted(found)]


def newest_exp_dir(log_dir: str | Path) -> Path | None:
    """The live launch's exp dir: the highest number."""
    found = exp_dirs(log_dir)
    return found[-1] if found else None


def find_event_files(log_dir: str | Path, exp: Path | None = None) -> list[Path]:
    """Event files of `exp` (default: the newest exp dir), oldest first (names embed the creation time)."""
    exp = exp if exp is not None else newest_exp_dir(log_dir)
    if exp is None:
        return []
    tb = exp / TENSORBOARD_DIR
    try:
        files = [p for p in tb.rglob("events.out.tfevents.*") if p.is_file()]
    except OSError:
        return []
    return sorted(files, key=lambda p: (_created(p), p.name))


def _created(p: Path) -> int:
    parts = p.name.split(".")
    try:
        return int(parts[3])
    except (IndexError, ValueError):
        return 0


def to_metric_events(run_id: str, attempt: int, scalars: list[Scalar]) -> list[MetricEvent]:
    """Scalars as observations, under Shepherd's metric names."""
    return [
        MetricEvent(run_id, attempt, canonical("tensorboard", s.tag), s.step, s.value, s.wall_time)
        for s in scalars
    ]


def read_exp_scalars(exp: Path) -> list[Scalar]:
    """Every scalar of one exp dir's event files, from the start (plots of a run's history)."""
    out: list[Scalar] = []
    for path in find_event_files(exp.parent, exp):
        reader = EventFileReader(path, 0)
        while True:
            before = reader.offset
            try:
                res = reader.read()
            except OSError:
                break
            out.extend(res.scalars)
            if res.offset == before or res.problem == "missing":
                break
    return out


class TensorBoardWatcher:
    """All event files of a run's newest exp dir, each from its own (persistable) offset.

    Where a file starts: `offsets[path]`, or `load(path)` → the saved `(inode, offset)`, asked once when
    the file is first listed (a file that appears later, e.g. a resumed attempt's, starts at 0).
    `cursors()` is what to save once the scalars were used.
    """

    def __init__(
        self,
        log_dir: str | Path,
        offsets: dict[str, int] | None = None,
        *,
        verify_data: bool = False,
        load: Callable[[str], tuple[int, int] | None] | None = None,
        resync_after_s: float = 30.0,
    ) -> None:
        self.log_dir = Path(log_dir)
        self.verify_data = verify_data
        self.readers: dict[str, EventFileReader] = {}
        self._saved = dict(offsets or {})
        self._load = load
        self.resync_after_s = resync_after_s
        self._files: list[Path] | None = None

    def offsets(self) -> dict[str, int]:
        return {k: r.offset for k, r in self.readers.items()}

    def cursors(self) -> dict[str, tuple[int, int]]:
        """`path -> (inode, offset)` of every file read so far."""
        return {k: (r.inode, r.offset) for k, r in self.readers.items() if r.inode is not None}

    def _reader(self, path: Path) -> EventFileReader:
        key = str(path)
        reader = self.readers.get(key)
        if reader is None:
            saved = self._load(key) if self._load is not None else None
            inode, offset = saved if saved is not None else (None, self._saved.get(key, 0))
            reader = EventFileReader(
                path, offset, verify_data=self.verify_data, inode=inode, resync_after_s=self.resync_after_s
            )
            self.readers[key] = reader
        return reader

    def read(self, rescan: bool = True, budget_bytes: int = 64 * 1024 * 1024) -> list[Scalar]:
        """New scalars of every event file; `rescan=False` reads the files found by the last listing.

        At most about `budget_bytes` are decoded per call (the daemon calls on every tick): a backlog of
        gigabytes is caught up over several ticks instead of holding the event loop for minutes.
        """
        if rescan or self._files is None:
            self._files = find_event_files(self.log_dir)
        out: list[Scalar] = []
        spent = 0
        for path in self._files:
            reader = self._reader(path)
            while spent < budget_bytes:  # each read is bounded: go on while it advances, within the budget
                before = reader.offset
                try:
                    res = reader.read()
                except OSError as exc:
                    log.warning("could not read tensorboard event file", path=str(path), error=str(exc))
                    break
                out.extend(res.scalars)
                spent += max(0, res.offset - before)
                if res.offset == before or res.problem == "missing":
                    break
        return out
