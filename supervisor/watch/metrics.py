"""Incremental reading of the trainer's `metrics.jsonl` (one JSON object per step).

Same cursor discipline as the log tailer: (inode, offset, line_no), a partial
last line waits for its newline, a replaced file starts over. On resume the
trainer rewrites the file (keeping lines up to the checkpoint step) through
`os.replace`, so a new inode is normal; lines already seen in this process
are recognised by content and not re-emitted.

Bounded like every input the job writes: a line over `MAX_LINE_BYTES` is skipped (even one longer than a
whole read, which would otherwise be waited on forever), and a row keeps at most `MAX_VALUES_PER_ROW`
scalars, so one line cannot flood the rules with events.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

import structlog

from supervisor.domain.boundedjson import InputRefused, loads_bounded
from supervisor.domain.observations import MetricEvent
from supervisor.watch.metric_names import canonical
from supervisor.watch.tailer import FileCursor

log = structlog.get_logger(__name__)

NON_METRIC_KEYS = frozenset({"step", "time", "timestamp", "wall_time", "_time"})
MAX_LINE_BYTES = 1024 * 1024  # a step's metrics are a few kilobytes
MAX_VALUES_PER_ROW = 2000
MAX_TAG_CHARS = 256


@dataclass(frozen=True, slots=True)
class MetricRow:
    step: int
    time: float | None
    values: dict[str, float]


def parse_metrics_line(line: bytes | str) -> MetricRow | None:
    """One jsonl line; None unless it is a bounded object with a numeric `step`. Non-numeric values, tags over
    `MAX_TAG_CHARS` and values past the first `MAX_VALUES_PER_ROW` are skipped."""
    try:
        # only the top level is read: nested values are skipped, so their depth is not walked
        data = loads_bounded(line, what="metrics.jsonl line", max_bytes=MAX_LINE_BYTES, max_depth=None)
    except InputRefused:
        return None
    if not isinstance(data, dict):
        return None
    step = data.get("step")
    if isinstance(step, bool) or not isinstance(step, int | float) or not math.isfinite(step):
        return None
    t = data.get("time", data.get("timestamp"))
    when = float(t) if isinstance(t, int | float) and not isinstance(t, bool) else None
    values: dict[str, float] = {}
    for k, v in data.items():
        if k in NON_METRIC_KEYS or isinstance(v, bool) or not isinstance(v, int | float):
            continue
        if len(k) > MAX_TAG_CHARS:
            continue
        values[k] = float(v)  # NaN/inf kept: a NaN loss is exactly what a rule wants to see
        if len(values) >= MAX_VALUES_PER_ROW:
            break
    return MetricRow(int(step), when, values)


@dataclass(slots=True)
class MetricsRead:
    rows: list[MetricRow]
    cursor: FileCursor | None
    replaced: bool = False
    bad_lines: int = 0


class MetricsReader:
    """Reads new rows of one metrics.jsonl; `cursor` is what to persist after the rows were used."""

    def __init__(
        self, path: str | Path, cursor: FileCursor | None = None, max_bytes: int = 16 * 1024 * 1024
    ) -> None:
        self.path = Path(path)
        self.cursor = cursor
        self.max_bytes = max_bytes
        self._seen: dict[int, int] = {}  # step -> hash of the line, to skip re-emits after a rewrite
        self._skipping = False  # inside a line too long to read: drop bytes up to its newline

    def read(self) -> MetricsRead:
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return MetricsRead([], self.cursor)
        replaced = False
        try:
            st = os.fstat(fd)
            cur = self.cursor
            if cur is None or cur.inode != st.st_ino or st.st_size < cur.offset:
                replaced = cur is not None
                cur = FileCursor(st.st_ino, 0, 0)
            want = min(st.st_size - cur.offset, self.max_bytes)
            data = os.pread(fd, want, cur.offset) if want > 0 else b""
        finally:
            os.close(fd)
        if replaced or cur.offset == 0:
            self._skipping = False
        skipped_line = 0
        if self._skipping:
            first = data.find(b"\n")
            if first < 0:  # still inside the over-long line
                cur = FileCursor(cur.inode, cur.offset + len(data), cur.line_no)
                self.cursor = cur
                return MetricsRead([], cur, replaced, 0)
            self._skipping = False
            cur = FileCursor(cur.inode, cur.offset + first + 1, cur.line_no + 1)
            data = data[first + 1 :]
            skipped_line = 1
        nl = data.rfind(b"\n")
        if nl < 0:
            if len(data) > MAX_LINE_BYTES:
                # no newline in more than a line's worth of bytes: skip them rather than wait forever
                log.warning(
                    "metrics.jsonl line over the size limit skipped",
                    path=str(self.path),
                    offset=cur.offset,
                    limit=MAX_LINE_BYTES,
                )
                self._skipping = True
                cur = FileCursor(cur.inode, cur.offset + len(data), cur.line_no)
            self.cursor = cur
            return MetricsRead([], cur, replaced, skipped_line)
        rows: list[MetricRow] = []
        bad = skipped_line
        lines = data[:nl].split(b"\n")
        for raw in lines:
            if not raw.strip():
                continue
            row = parse_metrics_line(raw)
            if row is None:
                bad += 1
                continue
            h = hash(raw)
            if self._seen.get(row.step) == h:
                continue  # same line re-read after the trainer rewrote the file
            self._seen[row.step] = h
            rows.append(row)
        self.cursor = FileCursor(cur.inode, cur.offset + nl + 1, cur.line_no + len(lines))
        if bad:
            log.warning("unparseable metrics.jsonl lines skipped", path=str(self.path), count=bad)
        return MetricsRead(rows, self.cursor, replaced, bad)


def to_metric_events(run_id: str, attempt: int, rows: list[MetricRow], now: float) -> list[MetricEvent]:
    """Events under Shepherd's metric names (`train/reward_mean` -> `train:reward`), which the rules use."""
    return [
        MetricEvent(
            run_id,
            attempt,
            canonical("metrics.jsonl", tag),
            row.step,
            value,
            row.time if row.time is not None else now,
        )
        for row in rows
        for tag, value in row.values.items()
    ]
