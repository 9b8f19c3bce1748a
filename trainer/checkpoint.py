"""Checkpoint layout (NeMo RL's), atomic finalisation and top-k retention.

A checkpoint is written under `tmp_step_N`, every file and directory fsynced, then renamed to
`step_N` in one step: a reader (resume, the daemon) sees either a complete checkpoint or none.
A `tmp_step_N` left by a crash is never resumed from and is removed at the next start.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import structlog

log = structlog.get_logger(__name__)

STEP_RE = re.compile(r"^step_(\d+)$")
TMP_RE = re.compile(r"^tmp_step_(\d+)$")
INFO = "training_info.json"
STATUS = "latest_checkpoint_status.json"


def metric_key(metric_name: str) -> str:
    """NeMo RL's 'val:accuracy' names the logged scalar 'val/accuracy'."""
    prefix, _, name = metric_name.partition(":")
    return f"{prefix}/{name}"


def complete_checkpoints(checkpoint_dir: Path) -> list[tuple[int, Path]]:
    if not checkpoint_dir.is_dir():
        return []
    out = []
    for p in checkpoint_dir.iterdir():
        m = STEP_RE.match(p.name)
        if m and p.is_dir() and (p / INFO).is_file():
            out.append((int(m.group(1)), p))
    return sorted(out)


def latest_checkpoint(checkpoint_dir: Path) -> Path | None:
    found = complete_checkpoints(checkpoint_dir)
    return found[-1][1] if found else None


def select_to_delete(
    entries: list[tuple[int, float | None]], keep_top_k: int | None, higher_is_better: bool
) -> list[int]:
    """Steps to delete so that at most keep_top_k remain, plus the latest which is never deleted.

    Ranking: checkpoints without the metric go first, then the worst metric; on equal metrics the
    older step goes first (ties favour the newer step).
    """
    if keep_top_k is None or len(entries) <= keep_top_k:
        return []
    latest = max(s for s, _ in entries)

    def badness(e: tuple[int, float | None]) -> tuple[int, float, int]:
        step, value = e
        if value is None or value != value:  # missing or NaN
            return (0, 0.0, step)
        return (1, value if higher_is_better else -value, step)

    ranked = sorted(entries, key=badness, reverse=True)  # best first
    keep = {s for s, _ in ranked[:keep_top_k]} | {latest}
    return sorted(s for s, _ in entries if s not in keep)


def read_info(path: Path) -> dict[str, Any]:
    return dict(json.loads((path / INFO).read_text()))


def apply_retention(
    checkpoint_dir: Path, metric_name: str, keep_top_k: int | None, higher_is_better: bool
) -> list[int]:
    key = metric_key(metric_name)
    entries: list[tuple[int, float | None]] = []
    for step, path in complete_checkpoints(checkpoint_dir):
        value = read_info(path).get("metrics", {}).get(key)
        entries.append((step, float(value) if isinstance(value, int | float) else None))
    doomed = select_to_delete(entries, keep_top_k, higher_is_better)
    for step in doomed:
        shutil.rmtree(checkpoint_dir / f"step_{step}", ignore_errors=True)
        log.info("checkpoint removed by retention", step=step, metric=metric_name)
    return doomed


def best_checkpoint(
    checkpoint_dir: Path, metric_name: str, higher_is_better: bool
) -> tuple[Path | None, float | None]:
    key = metric_key(metric_name)
    best: tuple[Path | None, float | None] = (None, None)
    for _, path in complete_checkpoints(checkpoint_dir):
        v = read_info(path).get("metrics", {}).get(key)
        if not isinstance(v, int | float):
            continue
        if best[1] is None or (v >= best[1] if higher_is_better else v <= best[1]):
            best = (path, float(v))
    return best


def clean_stale_tmp(checkpoint_dir: Path) -> list[Path]:
    removed = []
    if checkpoint_dir.is_dir():
        for p in checkpoint_dir.iterdir():
            if TMP_RE.match(p.name):
                shutil.rmtree(p, ignore_errors=True)
                removed.append(p)
                log.warning("removed incomplete checkpoint (a save was interrupted)", path=str(p))
    return removed


def _fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_tree(root: Path) -> None:
    for dirpath, _, files in os.walk(root):
        for f in files:
            _fsync_path(Path(dirpath) / f)
        _fsync_path(Path(dirpath))


def write_json_atomic(path: Path, obj: Any) -> None:
    """Write next to the target, fsync, rename: readers never see a half-written file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=2, sort_keys=True, default=str)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def tmp_dir_for(checkpoint_dir: Path, step: int) -> Path:
    return checkpoint_dir / f"tmp_step_{step}"


def finalize(checkpoint_dir: Path, step: int) -> Path:
    tmp = tmp_dir_for(checkpoint_dir, step)
    final = checkpoint_dir / f"step_{step}"
    fsync_tree(tmp)
    if final.exists():  # re-saving a step (e.g. after a resume with different retention)
        shutil.rmtree(final)
    os.replace(tmp, final)
    _fsync_path(checkpoint_dir)
    return final
