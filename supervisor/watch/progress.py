"""Forward motion of a run, read from tqdm bars in logs and from the trainer's status.json.

Hangs print no error (real-failure-logs #10): the only signal is that these
numbers stop moving, so parsing them must be lenient and never raise. A torn
or half-written status.json is "no update", not a failure.
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from supervisor.domain.observations import ProgressEvent

# `desc: 21%|##  | 428/2048 [02:01<05:42, 4.73it/s, loss=0.1]` and `desc: 428it [00:01, 300.00it/s]`.
# n/total may be unit-scaled (`1.2k/2.05k`); the rate may be `?it/s`, `s/it` or a custom unit.
_NUM = r"[\d.]+[kMGTPE]?"
_BAR_RE = re.compile(
    r"(?:(?P<desc>[^\r\n|:\]\u23ce]{0,200}?):\s*)?"
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
        return str(inner) if inner is not None else json.dumps(v, sort_keys=True)
    return str(v)


def parse_status(raw: bytes | str) -> TrainerStatus | None:
    """None for anything that is not a complete JSON object (torn write, empty file, garbage)."""
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(data, dict):
        return None
    return TrainerStatus(
        state=str(data.get("state") or ""),
        step=_int(data.get("step")),
        total_steps=_int(data.get("total_steps")),
        phase=str(data.get("phase") or ""),
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
        extra={k: v for k, v in data.items() if k not in _KNOWN},
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
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            st = os.fstat(fd)
            sig = (st.st_ino, st.st_size, st.st_mtime_ns)
            if sig == self._sig:
                return None
            raw = os.pread(fd, min(st.st_size, 1024 * 1024), 0)
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
