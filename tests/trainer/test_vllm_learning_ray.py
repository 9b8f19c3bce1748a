"""A GRPO run with vLLM generation through the real Ray path learns, and resuming it reproduces it exactly.

Two trainer processes in all (each starts Ray and a vLLM engine, ~1 min on 2 busy cores): the straight run,
and a run resumed from the straight run's step-50 checkpoint (ten steps: a new engine refit from the
checkpoint must sample what the old one did from its first step on, and every later step depends on the one
before).
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.trainer.conftest import REPO, read_metrics, read_status, run_cli

pytest.importorskip("ray", reason="ray is not installed")
pytestmark = [pytest.mark.vllm, pytest.mark.ray]

STEPS, RESUME_AT = 60, 50


def vllm_run(tmp: Path, *extra: str) -> list[str]:
    return [
        "--config",
        str(REPO / "examples" / "toy-grpo-vllm.yaml"),
        f"grpo.max_num_steps={STEPS}",
        f"checkpointing.save_period={RESUME_AT}",
        "checkpointing.keep_top_k=null",
        f"checkpointing.checkpoint_dir={tmp / 'ckpt'}",
        f"logger.log_dir={tmp / 'logs'}",
        *extra,
    ]


@pytest.fixture(scope="module")
def ray_env() -> Iterator[dict[str, str]]:
    """A private Ray temp root: on a shared dev machine another user's Ray sessions in /tmp/ray were seen to
    kill ours ("Owner's node has crashed"); a short path keeps Ray's socket paths under the 107-byte limit."""
    with tempfile.TemporaryDirectory(prefix="ray-", dir="/tmp") as d:
        yield {"RAY_TMPDIR": d}


@pytest.fixture(scope="module")
def straight(tmp_path_factory: pytest.TempPathFactory, ray_env: dict[str, str]) -> Path:
    from trainer.generation.vllm_backend import vllm_available

    ok, why = vllm_available()
    if not ok:
        pytest.skip(why)
    tmp = tmp_path_factory.mktemp("vllm-straight")
    r = run_cli(vllm_run(tmp), env=ray_env, timeout=600)
    assert r.returncode == 0, r.stderr[-4000:]
    assert "starting local ray" in r.stderr and "ray=True" in r.stderr and "backend=vllm" in r.stderr
    assert "vllm engine ready" in r.stdout + r.stderr  # logged in the rollout actor; Ray forwards it
    return tmp


def comparable(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every logged value except wall-clock ones (time, timing/*, performance/*)."""
    return [
        {k: v for k, v in row.items() if k != "time" and not k.startswith(("timing/", "performance/"))}
        for row in rows
    ]


def test_tiny_llama_learns_reverse_with_vllm_generation_through_ray(straight: Path) -> None:
    rows = read_metrics(straight)
    train = [row for row in rows if "train/reward_mean" in row]
    assert [row["step"] for row in train] == list(range(1, STEPS + 1))
    first = train[0]["train/reward_mean"]
    last10 = sum(row["train/reward_mean"] for row in train[-10:]) / 10
    assert last10 >= first + 0.3, (first, last10)
    val = {row["step"]: row["val/accuracy"] for row in rows if "val/accuracy" in row}
    assert val[STEPS] >= val[0] + 0.15, val
    # the engine was refit after every step: its log-probs are the policy's at every step
    assert max(row["train/logprob_gap"] for row in train) < 1e-3
    assert read_status(straight)["state"] == "finished"


def test_resuming_from_step_n_reproduces_every_later_metric_of_the_straight_run(
    straight: Path, tmp_path: Path, ray_env: dict[str, str]
) -> None:
    # "stop at N" leaves the same step_N a straight run saves (test_runs.py checks the stop itself); what
    # vLLM could break is the rest: a new engine, refit from the checkpoint, must sample what the old one did
    ckpt = straight / "ckpt" / f"step_{RESUME_AT}"
    r = run_cli([*vllm_run(tmp_path), "--resume-from", str(ckpt)], env=ray_env, timeout=600)
    assert r.returncode == 0, r.stderr[-4000:]
    assert "resumed" in r.stderr and "ray=True" in r.stderr
    resumed = read_metrics(tmp_path)
    assert [row["step"] for row in resumed] == list(range(RESUME_AT + 1, STEPS + 1))
    later = [row for row in read_metrics(straight) if row["step"] > RESUME_AT]
    assert comparable(resumed) == comparable(later)
