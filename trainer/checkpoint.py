"""When and how a run saves, so the training loop makes one call per step and the daemon can trust step_N.

Layout is NeMo RL's. A checkpoint is written under `tmp_step_N`, every file and directory fsynced,
then renamed to `step_N` in one step: a reader (resume, the daemon) sees either a complete
checkpoint or none. A `tmp_step_N` left by a crash is never resumed from and is removed at the
next start. `Checkpointer` decides when (period, last step, graceful stop, the save-by deadline)
and does the save (state, `training_info.json`, rename, retention, `latest_checkpoint_status.json`);
the files inside a checkpoint are written by the driver's `write_state`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from trainer.config import parse_duration

if TYPE_CHECKING:
    from trainer.config import CheckpointingConfig

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
    entries: Sequence[tuple[int, float | None]], keep_top_k: int | None, higher_is_better: bool
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


def find_resume_point(checkpoint_dir: Path, *, enabled: bool, resume_from: str | None) -> Path | None:
    """`--resume-from` (must be complete), else the newest complete `step_N`; stale tmp dirs go first."""
    if resume_from:
        p = Path(resume_from).resolve()
        if not (p / INFO).is_file():
            raise FileNotFoundError(f"--resume-from {p}: not a complete checkpoint (no {INFO})")
        return p
    if not enabled:
        return None
    clean_stale_tmp(checkpoint_dir)
    return latest_checkpoint(checkpoint_dir)


class StatusSink(Protocol):
    """Where a save reports its phase and the last/best checkpoint (`telemetry.StatusFile`)."""

    def update(self, **fields: Any) -> None: ...


@dataclass(frozen=True, slots=True)
class RunInfo:
    """The `training_info.json` fields that stay the same for the whole run."""

    total_steps: int
    config_hash: str
    exp_dir: str  # the exp_NNN name, so a resume logs into the same dir


class Checkpointer:
    """Decides when the run saves and writes each save; the loop calls `save` once per step.

    When: every `save_period` steps and at the last step (`save`), and once more on a graceful
    stop (`save_before_stop`: SIGTERM/SIGUSR1, `grpo.stop_at_step`, or `deadline_near`).
    How: `write_state` fills `tmp_step_N`, then `training_info.json` is written last, the dir is
    fsynced and renamed to `step_N`, retention keeps the top `keep_top_k` plus the latest, and
    `latest_checkpoint_status.json` and the status file name the result.
    """

    def __init__(
        self,
        cfg: CheckpointingConfig,
        directory: Path,
        run: RunInfo,
        *,
        write_state: Callable[[Path, int], None],
        consumed: Callable[[], tuple[int, int]],
        status: StatusSink,
        started_at: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """`write_state(tmp, step)` writes all but training_info.json; `consumed()`: (prompts, samples)."""
        self.cfg = cfg
        self.directory = directory
        self.run = run
        self._write_state = write_state
        self._consumed = consumed
        self._status = status
        self._started_at = started_at
        self._clock = clock

    @property
    def needs_validation(self) -> bool:
        """Checkpoints are ranked by a `val:` metric, so a step that saves must be validated first."""
        return self.cfg.metric_name.startswith("val:")

    def due(self, step: int, *, last_step: bool, stopping: bool) -> bool:
        """Whether `step` gets a checkpoint: every save_period steps, at the last step, and when stopping."""
        return self.cfg.enabled and (step % self.cfg.save_period == 0 or last_step or stopping)

    def due_before_stop(self, step: int) -> bool:
        """A graceful stop saves `step` unless nothing ran yet or `step_N` is already on disk."""
        return self.cfg.enabled and step > 0 and not (self.directory / f"step_{step}").is_dir()

    def deadline_near(self, step_times: Sequence[float]) -> bool:
        """Less time is left before `checkpoint_must_save_by` than two recent steps (+5 s) need."""
        by = self.cfg.checkpoint_must_save_by
        if by is None:
            return False
        left = parse_duration(by) - (self._clock() - self._started_at)
        need = 2 * max(step_times[-5:], default=0.0) + 5.0
        return left < need

    def save(
        self, step: int, metrics: Mapping[str, float], *, last_step: bool, stopping: bool
    ) -> Path | None:
        """The per-step call: write `step_N` when due; a stopping step is left to `save_before_stop`."""
        if stopping or not self.due(step, last_step=last_step, stopping=stopping):
            return None
        return self._save(step, metrics)

    def save_before_stop(self, step: int, metrics: Mapping[str, float]) -> Path | None:
        """The graceful stop's save, so the run can exit 75 with `step_N` on disk."""
        if not self.due_before_stop(step):
            return None
        return self._save(step, metrics)

    def _save(self, step: int, metrics: Mapping[str, float]) -> Path:
        self._status.update(
            state="checkpointing", phase="checkpointing", phase_done=0, phase_total=1, rate=None
        )
        tmp = tmp_dir_for(self.directory, step)
        if tmp.exists():
            shutil.rmtree(tmp)
        tmp.mkdir(parents=True)
        self._write_state(tmp, step)
        prompts, samples = self._consumed()
        info = {
            "step": step,
            "total_steps": self.run.total_steps,
            "consumed_samples": samples,
            "consumed_prompts": prompts,
            "metrics": dict(metrics),
            "config_hash": self.run.config_hash,
            "exp_dir": self.run.exp_dir,
            "saved_at": self._clock(),
        }
        write_json_atomic(tmp / INFO, info)
        final = finalize(self.directory, step)
        c = self.cfg
        apply_retention(self.directory, c.metric_name, c.keep_top_k, c.higher_is_better)
        best, best_val = best_checkpoint(self.directory, c.metric_name, c.higher_is_better)
        write_json_atomic(
            self.directory / STATUS,
            {"step": step, "path": str(final), "complete": True, "saved_at": info["saved_at"]},
        )
        self._status.update(
            last_checkpoint=str(final),
            best_checkpoint=str(best) if best else None,
            best_metric=best_val,
            phase_done=1,
        )
        log.info("checkpoint saved", step=step, path=str(final))
        return final
