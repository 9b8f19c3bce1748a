"""Shared helpers: tiny, fast configs and a runner for `python -m trainer` as a real subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support import forked_trainer

REPO = Path(__file__).resolve().parents[2]


def tiny_overrides(tmp: Path, **extra: Any) -> list[str]:
    """A few-second CPU job without Ray; extra keys use dotted names with '__' for '.'."""
    base: dict[str, Any] = {
        "grpo.max_num_steps": 6,
        "grpo.num_prompts_per_step": 4,
        "grpo.num_generations_per_prompt": 4,
        "grpo.val_period": 3,
        "grpo.max_val_samples": 8,
        "data.task": "reverse",
        "policy.generation.max_new_tokens": 3,
        "policy.optimizer.lr": 1e-3,
        "cluster.ray": False,
        "checkpointing.checkpoint_dir": str(tmp / "ckpt"),
        "checkpointing.save_period": 2,
        "logger.log_dir": str(tmp / "logs"),
        "logger.status_interval_s": 0.5,
    }
    base.update({k.replace("__", "."): v for k, v in extra.items()})
    return [f"{k}={'null' if v is None else v}" for k, v in base.items()]


def run_cli(
    args: list[str], env: dict[str, str] | None = None, timeout: float = 120, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """`python -m trainer ARGS` in a fresh interpreter: the command users and the launchers run."""
    return subprocess.run(
        [sys.executable, "-m", "trainer", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=trainer_env(env),
        cwd=cwd or REPO,
    )


def trainer_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment a test's trainer runs in: this one, unbuffered, with no Ray cluster to join."""
    full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    full_env.pop("RAY_ADDRESS", None)
    return full_env


def run_forked(
    args: list[str], env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """`run_cli`, forked from a process that has imported torch already (tests/support/forked_trainer.py)."""
    return forked_trainer.run(args, trainer_env(env), REPO, timeout)


def start_forked(
    args: list[str], io_dir: Path, env: dict[str, str] | None = None
) -> forked_trainer.TrainerProcess:
    """A run left going, for a test that watches or signals it; its stdout and stderr are files in `io_dir`
    (tests/support/forked_trainer.py)."""
    return forked_trainer.start(args, trainer_env(env), REPO, io_dir)


def read_status(tmp: Path) -> dict[str, Any]:
    return dict(json.loads((tmp / "logs" / "status.json").read_text()))


def read_metrics(tmp: Path, exp: str = "exp_001") -> list[dict[str, Any]]:
    path = tmp / "logs" / exp / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    return tmp_path
