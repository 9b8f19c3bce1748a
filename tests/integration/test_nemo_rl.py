"""NeMo RL's TensorBoard scalars feeding metric rules across a resume, on real Slurm through our plain
launcher (quick; the same driver under NeMo RL's own ray.sub: tests/integration/test_nemo_rl_raysub.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.daemon import REPO, DaemonProcess, wait_for
from tests.support.specs import write_spec

pytestmark = pytest.mark.slurm
PLAIN = REPO / "tests" / "support" / "plain.sub"
STANDIN = REPO / "tests" / "support" / "nemo_rl_standin.py"


@pytest.fixture(scope="module")
def sup(tmp_path_factory: pytest.TempPathFactory, slurm_cluster: Any) -> Any:
    root = tmp_path_factory.mktemp("nemo-rl-daemon")
    d = DaemonProcess(root / "root", env={**slurm_cluster.env, "SHEPHERD_LAUNCH_SCRIPT": str(PLAIN)})
    d.start()
    yield d
    d.stop()


def spec(tmp: Path, name: str, *extra: str, rules: str = "", **top: object) -> tuple[Path, Path]:
    ck = tmp / name / "results"
    rec = tmp / name / "record.jsonl"
    argv = ["python", str(STANDIN), f"checkpointing.checkpoint_dir={ck}", "--record", str(rec), *extra]
    path = write_spec(
        tmp,
        name,
        argv,
        checkpoint=ck,
        checkpoint_arg="checkpoint_dir_arg: ['checkpointing.checkpoint_dir={checkpoint_dir}']",
        rules=rules,
        shared_cache_dir=tmp / "shared-cache",
        **top,
    )
    return path, ck


def test_tensorboard_only_scalars_feed_metric_rules_across_a_resume(
    sup: DaemonProcess, tmp_path: Path
) -> None:
    """NeMo RL logs scalars only to TensorBoard, one exp_NNN/ per launch: the resumed attempt's new event
    file is read, its NaN reward fires the default nan-loss rule (a rollback to the step before), the same
    divergence in the rolled-back attempt gives up, and `status` shows the newest scalars."""
    logs = tmp_path / "nrl-tb" / "logs"
    # --no-summary: the driver prints no per-step results, so only the TensorBoard scalar can name the NaN
    argv = (f"logger.log_dir={logs}", "--fail-at", "25", "--steps", "30", "--nan-at", "28", "--no-summary")
    path, _ = spec(tmp_path, "nrl-tb", *argv, trainer_log_dir=logs)
    run = sup.submit(path)
    final = sup.wait_state(run, {"COMPLETED", "FAILED", "GAVE_UP"}, timeout=180)
    assert final["state"] == "GAVE_UP", sup.status(run)
    assert sorted(p.name for p in logs.iterdir()) == ["exp_001", "exp_002", "exp_003"]
    assert not list(logs.rglob("metrics.jsonl"))

    nan = [d for d in sup.status(run)["decisions"] if d["rule"] == "nan-loss"]
    assert [d["attempt"] for d in nan] == [2, 3], nan
    assert all("train:reward = nan at step 28" in d["reason"] for d in nan), nan
    assert "resuming from step_10" in nan[0]["outcome"] and "gave up" in nan[1]["outcome"], nan

    def metrics() -> Any:
        progress = sup.status(run)["progress"] or {}
        return progress.get("metrics") if progress.get("attempt") == 3 else None

    shown = wait_for(lambda: (m := metrics()) and m.get("step") == 30 and m, timeout=30, what="metrics")
    assert shown["train:reward"] == 1.0 and abs(shown["train:loss"] - 1 / 30) < 1e-6
