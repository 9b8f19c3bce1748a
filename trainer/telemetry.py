"""What the supervisor watches: TensorBoard scalars, metrics.jsonl, status.json and tqdm lines.

See docs/trainer.md for the contract; names here are part of it.
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
import time
from pathlib import Path
from typing import Any

import structlog
from tqdm import tqdm

from trainer.checkpoint import write_json_atomic

log = structlog.get_logger(__name__)

EXP_RE = re.compile(r"^exp_(\d{3,})$")
STATES = (
    "starting",
    "generating",
    "training",
    "validating",
    "checkpointing",
    "stopped",
    "finished",
    "failed",
)


def existing_exp_dirs(log_dir: Path) -> list[Path]:
    if not log_dir.is_dir():
        return []
    return sorted(
        (p for p in log_dir.iterdir() if p.is_dir() and EXP_RE.match(p.name)), key=lambda p: int(p.name[4:])
    )


def new_exp_dir(log_dir: Path) -> Path:
    found = existing_exp_dirs(log_dir)
    n = int(found[-1].name[4:]) + 1 if found else 1
    path = log_dir / f"exp_{n:03d}"
    path.mkdir(parents=True, exist_ok=False)
    return path


class StatusFile:
    """`<log_dir>/status.json`, replaced atomically on every change and by a heartbeat thread.

    `timestamp` moves with every write (heartbeat included: the trainer process is alive);
    `last_progress_at` moves only when step or phase progress moves, so a hang shows as a
    fresh timestamp with a stale last_progress_at.
    """

    def __init__(self, path: Path, interval_s: float, base: dict[str, Any]) -> None:
        self.path = path
        self.interval = interval_s
        self.lock = threading.Lock()
        now = time.time()
        self.data: dict[str, Any] = {
            "state": "starting",
            "step": 0,
            "total_steps": 0,
            "phase": "starting",
            "phase_done": 0,
            "phase_total": 0,
            "rate": None,
            "rate_unit": None,
            "last_checkpoint": None,
            "best_checkpoint": None,
            "best_metric": None,
            "metric_name": None,
            "exit_code": None,
            "error": None,
            "pid": os.getpid(),
            "started_at": now,
            "last_progress_at": now,
            "timestamp": now,
            **base,
        }
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._write()

    def _write(self) -> None:
        self.data["timestamp"] = time.time()
        write_json_atomic(self.path, self.data)

    def update(self, **fields: Any) -> None:
        with self.lock:
            progressed = any(
                k in fields and fields[k] != self.data.get(k) for k in ("step", "phase_done", "phase")
            )
            self.data.update(fields)
            if progressed:
                self.data["last_progress_at"] = time.time()
            self._write()

    def start_heartbeat(self) -> None:
        def beat() -> None:
            while not self._stop.wait(self.interval):
                with self.lock:
                    self._write()

        self._thread = threading.Thread(target=beat, name="status-heartbeat", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)


class MetricsLogger:
    """TensorBoard + metrics.jsonl; on resume both drop everything after the checkpoint step."""

    def __init__(self, exp_dir: Path, tensorboard: bool, resume_step: int | None) -> None:
        self.exp_dir = exp_dir
        self.jsonl = exp_dir / "metrics.jsonl"
        if resume_step is not None:
            self._truncate_jsonl(resume_step)
        self.tb: Any = None
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except (
                ImportError
            ) as e:  # a GPU image with torch but no tensorboard: metrics.jsonl still holds all
                log.warning(
                    "TensorBoard writer off: tensorboard is not installed; metrics.jsonl is still written",
                    error=str(e),
                    hint="pip install tensorboard, or logger.tensorboard_enabled=false to silence this",
                )
            else:
                purge = resume_step + 1 if resume_step is not None else None
                self.tb = SummaryWriter(log_dir=str(exp_dir / "tensorboard"), purge_step=purge, flush_secs=10)
        self._fh = open(self.jsonl, "a")

    def _truncate_jsonl(self, step: int) -> None:
        if not self.jsonl.exists():
            return
        keep = []
        for line in self.jsonl.read_text().splitlines():
            try:
                if int(json.loads(line)["step"]) <= step:
                    keep.append(line)
            except (ValueError, KeyError, TypeError):
                continue
        tmp = self.jsonl.with_suffix(".tmp")
        tmp.write_text("".join(x + "\n" for x in keep))
        os.replace(tmp, self.jsonl)

    def log(self, step: int, metrics: dict[str, float]) -> None:
        if self.tb is not None:
            for tag, value in metrics.items():
                self.tb.add_scalar(tag, value, step)
            self.tb.flush()
        self._fh.write(json.dumps({"step": step, "time": time.time(), **metrics}, sort_keys=False) + "\n")
        self._fh.flush()

    def close(self) -> None:
        if self.tb is not None:
            self.tb.close()
        self._fh.close()


def rollout_bar(total: int, mininterval: float) -> tqdm:  # type: ignore[type-arg]
    """NeMo Gym's bar: `Collecting rollouts:  21%|##  | 428/2048 [02:01<05:42, 4.73it/s]` on stderr."""
    return tqdm(
        total=total,
        desc="Collecting rollouts",
        file=sys.stderr,
        ascii=True,
        mininterval=mininterval,
        maxinterval=60,
        dynamic_ncols=False,
        ncols=100,
        leave=True,
    )
