"""The README's first command, shortened: the demo must keep working end to end."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support.daemon import REPO

pytestmark = [pytest.mark.slurm, pytest.mark.ray]


def test_the_demo_detects_the_failure_resumes_and_completes(tmp_path: Path, slurm_cluster: Any) -> None:
    root = tmp_path / "demo"
    env = {**os.environ, **slurm_cluster.env}
    res = subprocess.run(
        [str(REPO / "scripts" / "demo"), "--steps", "24", "--root", str(root)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
    )
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-4000:]
    assert "hf-cache-not-shared" in out  # the failure was recognised
    assert "HF_HOME=" in out  # and fixed
    assert "validation accuracy" in out and "reward:" in out
    record = json.loads((root / "slack-record.json").read_text())
    texts = [m.get("text") or "" for m in record["messages"]]
    assert any("submitted" in t for t in texts) and any("completed" in t for t in texts)
    assert any("HF" in t for t in texts)  # the alert about the cache reached the thread
    # a healthy run: no RL training-health rule (rules/default.yaml) said a word
    health = (
        "training diverged",
        "reward collapsed",
        "generation and training disagree",
        "gradient norm spike",
        "response length collapsed",
        "pinned at the length limit",
        "no learning signal",
        "validation regressed",
    )
    assert [t for t in texts if any(h in t for h in health)] == []
    assert (root / "reward.png").stat().st_size > 10_000
