"""Forward motion of a run, read from tqdm bars in logs and from the trainer's status.json.

Hangs print no error (real-failure-logs #10): the only signal is that these
numbers stop moving, so parsing them must be lenient and never raise. A torn
or half-written status.json is "no update", not a failure. It is also bounded
(size, nesting, how much of it is kept), because whatever the job writes there
is kept in the store and shown by `shepherd status`.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import re2  # type: ignore[import-untyped]
import structlog

from supervisor.domain.boundedjson import InputRefused, loads_bounded
from supervisor.domain.observations import ProgressEvent

log = structlog.get_logger(__name__)

MAX_STATUS_BYTES = 1024 * 1024  # the trainer's status.json is a few hundred bytes
MAX_STATUS_DEPTH = 16
MAX_EXTRA_KEYS = 64  # unknown fields kept for `shepherd status`
MAX_TEXT = 1000  # characters kept of any one text value

# `desc: 21%|##  | 428/2048 [02:01<05:42, 4.73it/s, loss=0.1]` and `desc: 428it [00:01, 300.00it/s]`.
# n/total may be unit-scaled (`1.2k/2.05k`); the rate may be `?it/s`, `s/it` or a custom unit.
# RE2 (linear time), not Python's re: the bar is searched anywhere in a log line, and under backtracking a
# 60,000-digit line ending in `it/s]` took minutes (every start position re-scanned the digits).
_NUM = r"[\d.]+[kMGTPE]?"
_BAR_RE = re2.compile(
    r"(?:(?P<desc>[^\r\n|:\]\x{23ce}]{0,200}?):\s*)?"
    r"(?:(?P<pct>\d{1,3})%\|(?P<bar>[^|\r\n]*)\|\s*(?P<n>" + _NUM + r")/(?P<total>" + _NUM + r"|\?)"
    r"|(?P<n2>" + _NUM + r")(?P<unit2>[A-Za-z_]*))"
    r"\s*\[(?P<elapsed>\d[\d:]*|\?)(?:<(?P<remaining>[\d:?]+))?,\s*"
    r"(?P<rate>\?|[\d.]+[kMGTPE]?)(?P<rate_unit>s/[A-Za-z_]+|[A-Za-z_]+/s)"
    r"(?P<postfix>[^\[\]\r\n]*)\]"
)
_SCALE = {"": 1.0, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}


@dataclass(frozen=True, slots=True)
class BarProgress:
    """One tqdm bar reading; `rate` is always items per second (None when tqdm printed `?`)."""

    desc: str
    n: float
    total: float | None
    rate: float | None
    unit: str
    elapsed_s: float | None
    remaining_s: float | None


def _scaled(text: str) -> float:
    if text and text[-1] in _SCALE:
        return float(text[:-1]) * _SCALE[text[-1]]
    return float(text)


def _clock(text: str | None) -> float | None:
    """tqdm's `[H:]MM:SS` in seconds."""
    if not text or "?" in text:
        return None
    secs = 0.0
    try:
        for part in text.split(":"):
            secs = secs * 60 + float(part)
    except ValueError:
        return None
    return secs


def parse_tqdm(line: str) -> BarProgress | None:
    """The last bar in a line (redraws and splices may leave several), or None."""
    last = None
    for last in _BAR_RE.finditer(line):  # noqa: B007 - we want the final match
        pass
    if last is None:
        return None
    m = last
    try:
        if m.group("n") is not None:
            n = _scaled(m.group("n"))
            total = None if m.group("total") == "?" else _scaled(m.group("total"))
            unit = m.group("rate_unit").split("/")[0] if m.group("rate_unit").endswith("/s") else "it"
        else:
            n = _scaled(m.group("n2"))
            total = None
            unit = m.group("unit2") or "it"
        rate_text, rate_unit = m.group("rate"), m.group("rate_unit")
        rate: float | None = None
        if rate_text != "?":
            value = _scaled(rate_text)
            if rate_unit.startswith("s/"):
                rate = 1.0 / value if value > 0 else None
                unit = rate_unit[2:]
            else:
                rate = value
                unit = rate_unit[:-2]
    except ValueError:
        return None
    if not math.isfinite(n):
        return None
    desc = (m.group("desc") or "").strip()
    return BarProgress(desc, n, total, rate, unit, _clock(m.group("elapsed")), _clock(m.group("remaining")))


def bar_key(desc: str) -> str:
    """The ProgressEvent key for a bar: NeMo Gym's "Collecting rollouts" is "rollouts", others a slug."""
    low = desc.lower()
    if "rollout" in low:
        return "rollouts"
    slug = re.sub(r"[^a-z0-9]+", "_", low).strip("_")
    return f"bar:{slug}" if slug else "bar"


def bar_event(run_id: str, attempt: int, bar: BarProgress, at: float) -> ProgressEvent:
    detail: dict[str, object] = {"desc": bar.desc, "unit": bar.unit}
    if bar.rate is not None:
        detail["rate"] = bar.rate
    if bar.elapsed_s is not None:
        detail["elapsed_s"] = bar.elapsed_s
    if bar.remaining_s is not None:
        detail["remaining_s"] = bar.remaining_s
    return ProgressEvent(run_id, attempt, bar_key(bar.desc), bar.n, bar.total, at, detail)


# ---- status.json ------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class TrainerStatus:
    """The trainer's status.json, leniently typed; unknown fields are kept in `extra`."""

    state: str = ""
    step: int | None = None
    total_steps: int | None = None
    phase: str = ""
    phase_done: float | None = None
    phase_total: float | None = None
    rate: float | None = None
    rate_unit: str | None = None
    last_checkpoint: str | None = None
    best_checkpoint: str | None = None
    best_metric: float | None = None
    metric_name: str | None = None
    exit_code: int | None = None
    error: str | None = None
    pid: int | None = None
    started_at: float | None = None
    last_progress_at: float | None = None
    timestamp: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)


_KNOWN = {f for f in TrainerStatus.__dataclass_fields__ if f != "extra"}


def _num(v: Any) -> float | None:
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, int | float):
        return float(v) if math.isfinite(v) else None
    if isinstance(v, str):
        try:
            f = float(v)
        except ValueError:
            return None
        return f if math.isfinite(f) else None
    return None


def _int(v: Any) -> int | None:
    f = _num(v)
    return int(f) if f is not None else None


def _str(v: Any) -> str | None:
    if v is None:
        return None
    if isinstance(v, dict):
        # a checkpoint may be written as {"path": ..., "step": ...}
        inner = v.get("path") or v.get("name")
        return _clip(str(inner) if inner is not None else json.dumps(v, sort_keys=True))
    return _clip(str(v))


def _clip(text: str) -> str:
    return text if len(text) <= MAX_TEXT else text[:MAX_TEXT] + "…"


def _extra_value(v: Any) -> Any:
    """An unknown field as kept: as it is while small, else as clipped text."""
    if v is None or isinstance(v, bool | int | float):
        return v
    if isinstance(v, str):
        return _clip(v)
    text = json.dumps(v, sort_keys=True)
    return v if len(text) <= MAX_TEXT else _clip(text)


def read_status(raw: bytes | str) -> dict[str, Any]:
    """status.json as a JSON object; raises `InputRefused` for a torn write, garbage or a bound crossed."""
    data = loads_bounded(raw, what="status.json", max_bytes=MAX_STATUS_BYTES, max_depth=MAX_STATUS_DEPTH)
    if not isinstance(data, dict):
        raise InputRefused(f"status.json: a JSON object was expected, not {type(data).__name__}")
    return data


def parse_status(raw: bytes | str) -> TrainerStatus | None:
    """None for anything that is not a complete, bounded JSON object (torn write, empty file, garbage)."""
    try:
        data = read_status(raw)
    except InputRefused:
        return None
    return TrainerStatus(
        state=_clip(str(data.get("state") or "")),
        step=_int(data.get("step")),
        total_steps=_int(data.get("total_steps")),
        phase=_clip(str(data.get("phase") or "")),
        phase_done=_num(data.get("phase_done")),
        phase_total=_num(data.get("phase_total")),
        rate=_num(data.get("rate")),
        rate_unit=_str(data.get("rate_unit")),
        last_checkpoint=_str(data.get("last_checkpoint")),
        best_checkpoint=_str(data.get("best_checkpoint")),
        best_metric=_num(data.get("best_metric")),
        metric_name=_str(data.get("metric_name")),
        exit_code=_int(data.get("exit_code")),
        error=_str(data.get("error")),
        pid=_int(data.get("pid")),
        started_at=_num(data.get("started_at")),
        last_progress_at=_num(data.get("last_progress_at")),
        timestamp=_num(data.get("timestamp")),
        extra=dict(
            itertools.islice(
                ((_clip(k), _extra_value(v)) for k, v in data.items() if k not in _KNOWN), MAX_EXTRA_KEYS
            )
        ),
    )


def status_events(
    run_id: str, attempt: int, status: TrainerStatus, previous: TrainerStatus | None, now: float
) -> list[ProgressEvent]:
    """A "status" event for every new snapshot (heartbeat: the trainer lives) and a "step" event only
    when the step or phase progress moved, so a heartbeat never looks like progress."""
    detail: dict[str, object] = {
        k: getattr(status, k) for k in sorted(_KNOWN) if getattr(status, k) not in (None, "")
    }
    if status.extra:
        detail["extra"] = dict(status.extra)
    at = status.timestamp if status.timestamp is not None else now
    step = float(status.step) if status.step is not None else 0.0
    total = float(status.total_steps) if status.total_steps else None
    out = [ProgressEvent(run_id, attempt, "status", step, total, at, detail)]
    moved = previous is None or (status.step, status.phase, status.phase_done) != (
        previous.step,
        previous.phase,
        previous.phase_done,
    )
    if moved and status.step is not None:
        progress_at = status.last_progress_at if status.last_progress_at is not None else at
        phase_detail: dict[str, object] = {"phase": status.phase}
        if status.phase_done is not None:
            phase_detail["phase_done"] = status.phase_done
        if status.phase_total is not None:
            phase_detail["phase_total"] = status.phase_total
        out.append(ProgressEvent(run_id, attempt, "step", step, total, progress_at, phase_detail))
    return out


class StatusReader:
    """Re-reads status.json when it changed; keeps the last good snapshot across torn reads."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.last: TrainerStatus | None = None
        self._sig: tuple[int, int, int] | None = None

    def poll(self) -> TrainerStatus | None:
        """A new snapshot, or None when nothing new could be read (missing, unchanged, torn)."""
        try:
            # O_NONBLOCK: a FIFO named status.json must not block the daemon
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
        except OSError:
            return None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                return None
            sig = (st.st_ino, st.st_size, st.st_mtime_ns)
            if sig == self._sig:
                return None
            if st.st_size > MAX_STATUS_BYTES:
                self._sig = sig  # not re-read until it changes
                log.warning(
                    "status.json ignored: over the size limit",
                    path=str(self.path),
                    size=st.st_size,
                    limit=MAX_STATUS_BYTES,
                )
                return None
            raw = os.pread(fd, st.st_size, 0)
        finally:
            os.close(fd)
        status = parse_status(raw)
        if status is None:
            return None  # torn: leave _sig unset so the next poll retries
        self._sig = sig
        if status == self.last:
            return None
        self.last = status
        return status

    def poll_events(self, run_id: str, attempt: int, now: float) -> list[ProgressEvent]:
        previous = self.last
        status = self.poll()
        return [] if status is None else status_events(run_id, attempt, status, previous, now)
