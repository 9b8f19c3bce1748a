"""Checkpoint discovery and ranking (NeMo RL layout: ``step_N/`` holding ``training_info.json``).

The core is pure over a directory listing so it can be tested without files;
`list_checkpoint_dir` is the thin I/O shell. A checkpoint counts only once it
is complete: ``tmp_step_N`` is a save in progress and a ``step_N`` without
``training_info.json`` was interrupted mid-save.
"""

from __future__ import annotations

import math
import os
import re
import stat
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from supervisor.domain.boundedjson import InputRefused, loads_bounded
from supervisor.domain.trainer_files import INFO_FILE, STEP_DIR_RE

log = structlog.get_logger(__name__)


MAX_INFO_BYTES = 1024 * 1024  # NeMo RL's training_info.json is a few hundred bytes
MAX_INFO_DEPTH = 16

Listing = tuple[str, Mapping[str, Any] | None, bool]  # (dir name, training_info or None, is_complete)


@dataclass(frozen=True, slots=True)
class Checkpoint:
    name: str
    step: int
    metric: float | None = None


@dataclass(frozen=True, slots=True)
class Choice:
    """The checkpoint to resume from (None: start from scratch) and why, in words for `shepherd status`."""

    checkpoint: Checkpoint | None
    reason: str
    skipped: tuple[str, ...] = ()


def metric_value(info: Mapping[str, Any] | None, metric: str | None) -> float | None:
    """Read ``val:accuracy`` / ``train:reward_mean`` / a plain key from training_info, however nested."""
    if info is None or not metric:
        return None
    candidates: list[Any] = [info.get(metric)]
    if ":" in metric:
        prefix, name = metric.split(":", 1)
        nested = info.get(prefix)
        candidates += [
            nested.get(name) if isinstance(nested, Mapping) else None,
            info.get(f"{prefix}_{name}"),
            info.get(f"{prefix}/{name}"),
            info.get(name),
        ]
    metrics = info.get("metrics")
    if isinstance(metrics, Mapping):
        # our trainer nests its logged scalars: {"metrics": {"val/accuracy": 0.9}} for val:accuracy
        candidates += [
            metrics.get(metric),
            metrics.get(metric.replace(":", "/", 1)),
            metrics.get(metric.split(":", 1)[-1]),
        ]
    for v in candidates:
        if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v):
            return float(v)
    return None


def discover(entries: Iterable[Listing], metric: str | None = None) -> list[Checkpoint]:
    """Complete ``step_N`` checkpoints, newest first; ``tmp_*`` and incomplete ones are ignored."""
    found = []
    for name, info, complete in entries:
        m = STEP_DIR_RE.match(name)
        if m is None or not complete or info is None:
            continue
        found.append(Checkpoint(name=name, step=int(m.group(1)), metric=metric_value(info, metric)))
    found.sort(key=lambda c: -c.step)
    return found


def rank(checkpoints: Iterable[Checkpoint], higher_is_better: bool = True) -> list[Checkpoint]:
    """Best first; ties go to the newer step (as NeMo RL's retention does); no metric ranks last."""

    def key(c: Checkpoint) -> tuple[int, float, int]:
        if c.metric is None:
            return (1, 0.0, -c.step)
        return (0, -c.metric if higher_is_better else c.metric, -c.step)

    return sorted(checkpoints, key=key)


def top_k(
    checkpoints: Iterable[Checkpoint], k: int | None, higher_is_better: bool = True
) -> list[Checkpoint]:
    """What the trainer keeps: the k best by metric, plus the latest (never deleted); all when k is None."""
    cps = list(checkpoints)
    if k is None or not cps:
        return cps
    kept = rank(cps, higher_is_better)[:k]
    latest = max(cps, key=lambda c: c.step)
    if latest not in kept:
        kept.append(latest)
    return kept


def candidates(
    checkpoints: Iterable[Checkpoint],
    selector: str = "latest",
    *,
    higher_is_better: bool = True,
    keep_top_k: int | None = None,
    before_step: int | None = None,
) -> list[Checkpoint]:
    """Checkpoints in the order to try them for `selector` (``latest``, ``best`` or ``step_N``).

    `before_step` (a rollback): only checkpoints saved before that step count, so ``best`` is the best one
    before the run went bad there and ``latest`` the last good one.
    """
    cps = [c for c in checkpoints if before_step is None or c.step < before_step]
    kept = top_k(cps, keep_top_k, higher_is_better)
    rest = [c for c in cps if c not in kept]
    by_step = sorted(kept, key=lambda c: -c.step) + sorted(rest, key=lambda c: -c.step)
    if selector == "latest":
        return by_step
    if selector == "best":
        ranked = rank(kept, higher_is_better) + rank(rest, higher_is_better)
        return ranked
    m = re.fullmatch(r"step_(\d+)", selector)
    if m is None:
        raise ValueError(f"unknown checkpoint selector {selector!r}: use latest, best or step_N")
    want = int(m.group(1))
    exact = [c for c in cps if c.step == want]
    return exact + [c for c in by_step if c.step != want]


def choose(
    checkpoints: Iterable[Checkpoint],
    selector: str = "latest",
    *,
    higher_is_better: bool = True,
    keep_top_k: int | None = None,
    exists: Callable[[str], bool] = lambda _name: True,
    before_step: int | None = None,
) -> Choice:
    """Pick the checkpoint to resume from; one that vanished since the listing falls back to the next."""
    order = candidates(
        checkpoints,
        selector,
        higher_is_better=higher_is_better,
        keep_top_k=keep_top_k,
        before_step=before_step,
    )
    if selector.startswith("step_") and (not order or order[0].name != selector):
        missing = [selector]
    else:
        missing = []
    skipped: list[str] = []
    for i, cp in enumerate(order):
        if not exists(cp.name):
            skipped.append(cp.name)
            continue
        gone = missing + skipped
        if not gone:
            what = "best" if selector == "best" else ("latest" if selector == "latest" else "requested")
            if before_step is not None:
                what += f" before step {before_step}"
            metric = f", metric {cp.metric:g}" if cp.metric is not None else ""
            return Choice(cp, f"resuming from {cp.name} ({what}{metric})")
        note = "; ".join(f"{g} vanished" if g in skipped else f"{g} not found" for g in gone)
        rank_word = "next latest" if selector != "best" else "next best"
        log.info("checkpoint fallback", wanted=gone[0], chosen=cp.name, position=i)
        return Choice(cp, f"{note}: falling back to {cp.name} ({rank_word})", tuple(skipped))
    if missing or skipped:
        names = ", ".join(missing + skipped)
        return Choice(None, f"no usable checkpoint ({names} gone): starting from scratch", tuple(skipped))
    if before_step is not None:
        return Choice(None, f"no complete checkpoint before step {before_step}")
    return Choice(None, "no complete checkpoint yet: starting from scratch")


# ----------------------------------------------------------------------------- I/O shell


def list_checkpoint_dir(path: Path) -> list[Listing]:
    """List ``path`` as (name, training_info, complete); unreadable info counts as incomplete."""
    out: list[Listing] = []
    try:
        children = sorted(path.iterdir())
    except FileNotFoundError:
        return out
    for child in children:
        if not child.is_dir():
            continue
        try:
            info = read_training_info(child / INFO_FILE)
        except FileNotFoundError:
            info = None
        except (OSError, InputRefused) as exc:
            log.warning(
                "checkpoint's training_info.json not usable", path=str(child / INFO_FILE), error=str(exc)
            )
            info = None
        out.append((child.name, info, info is not None))
    return out


def read_training_info(path: Path) -> Mapping[str, Any]:
    """A checkpoint's training_info.json, bounded: a regular file of at most `MAX_INFO_BYTES` holding a
    JSON object nested at most `MAX_INFO_DEPTH` deep; raises OSError or `InputRefused` otherwise."""
    # O_NONBLOCK: a FIFO in its place must not block the daemon
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise InputRefused(f"{INFO_FILE}: not a regular file")
        raw = os.pread(fd, MAX_INFO_BYTES + 1, 0)
    finally:
        os.close(fd)
    data = loads_bounded(raw, what=INFO_FILE, max_bytes=MAX_INFO_BYTES, max_depth=MAX_INFO_DEPTH)
    if not isinstance(data, dict):
        raise InputRefused(f"{INFO_FILE}: a JSON object was expected, not {type(data).__name__}")
    return data


def choose_in_dir(
    path: Path,
    selector: str = "latest",
    *,
    metric: str | None = None,
    higher_is_better: bool = True,
    keep_top_k: int | None = None,
    before_step: int | None = None,
) -> tuple[Choice, Path | None]:
    """Discover, rank and choose in a real checkpoint dir (re-checking existence at choice time)."""
    cps = discover(list_checkpoint_dir(path), metric)
    choice = choose(
        cps,
        selector,
        higher_is_better=higher_is_better,
        keep_top_k=keep_top_k,
        exists=lambda name: (path / name / INFO_FILE).is_file(),
        before_step=before_step,
    )
    return choice, (path / choice.checkpoint.name if choice.checkpoint else None)
