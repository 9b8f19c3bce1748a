"""The real thing: a random tiny model learns a toy task through Ray (2 DP policy workers + 1 rollout)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.trainer.conftest import REPO, read_metrics, read_status, run_cli

pytest.importorskip("ray", reason="ray is not installed")


@pytest.mark.ray
def test_tiny_model_learns_reverse_through_ray(tmp_path: Path) -> None:
    r = run_cli(
        [
            "--config",
            str(REPO / "examples" / "toy-grpo.yaml"),
            "grpo.max_num_steps=60",
            "cluster.ray=true",
            "cluster.num_cpus=2",
            "cluster.policy_workers=2",
            "cluster.cpus_per_worker=0.5",
            f"checkpointing.checkpoint_dir={tmp_path / 'ckpt'}",
            f"logger.log_dir={tmp_path / 'logs'}",
        ],
        timeout=400,
    )
    assert r.returncode == 0, r.stderr[-4000:]
    assert "starting local ray" in r.stderr and "ray=True" in r.stderr and "policy_workers=2" in r.stderr
    rows = [row for row in read_metrics(tmp_path) if "train/reward_mean" in row]
    first = rows[0]["train/reward_mean"]
    last10 = sum(row["train/reward_mean"] for row in rows[-10:]) / 10
    assert last10 >= first + 0.3, (first, last10)
    final_val = [row for row in read_metrics(tmp_path) if "val/accuracy" in row][-1]
    assert final_val["step"] == 60 and final_val["val/accuracy"] >= 0.5
    assert read_status(tmp_path)["state"] == "finished"
