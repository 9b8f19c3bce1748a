"""NeMo RL as a first-class citizen, on real Slurm: automatic resume, and `shepherd resume RUN best` staging.

The stand-in driver behaves like NeMo RL (always resumes from the highest step_N in its checkpoint dir), so a
resume from `best` only works if shepherd stages a checkpoint dir and points the job at it.
"""

from __future__ import annotations

import json
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


def records(tmp: Path, name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (tmp / name / "record.jsonl").read_text().splitlines()]


def steps(ck: Path) -> list[str]:
    return sorted(p.name for p in ck.glob("step_*"))


def snapshot(ck: Path) -> dict[str, str]:
    return {p.name: (p / "training_info.json").read_text() for p in sorted(ck.glob("step_*"))}


def test_hf_cache_failure_resumes_nemo_rl_from_its_newest_step(sup: DaemonProcess, tmp_path: Path) -> None:
    path, ck = spec(tmp_path, "nrl-hf", "--fail-at", "25", "--steps", "40")
    run = sup.submit(path)
    final = sup.wait_state(run, {"COMPLETED", "FAILED", "GAVE_UP"}, timeout=120)
    assert final["state"] == "COMPLETED", sup.status(run)
    [d] = [x for x in sup.status(run)["decisions"] if x["action"] != "none" and x["rule"] != "run-completed"]
    assert d["rule"] == "hf-cache-not-shared" and "resuming from step_20" in d["outcome"]
    first, second = records(tmp_path, "nrl-hf")
    assert first["resumed_from"] == 0 and first["hf_home"] is None
    assert second["resumed_from"] == 20 and second["checkpoint_dir"] == str(ck)
    assert second["hf_home"] == f"{tmp_path / 'shared-cache'}/huggingface"
    assert steps(ck) == ["step_10", "step_20", "step_30", "step_40"]
    assert not (tmp_path / "nrl-hf" / "results.staged").exists()  # latest: nothing staged


def test_cli_resume_from_best_stages_it_and_leaves_newer_steps_alone(
    sup: DaemonProcess, tmp_path: Path
) -> None:
    path, ck = spec(tmp_path, "nrl-best", "--fail-at", "31", "--failure", "odd", "--peak", "10")
    run = sup.submit(path)
    assert sup.wait_state(run, {"COMPLETED", "FAILED", "GAVE_UP"}, timeout=120)["state"] == "FAILED"
    before = snapshot(ck)
    assert sorted(before) == ["step_10", "step_20", "step_30"]
    out = sup.cli("resume", run, "best").stdout
    assert "step_10" in out
    final = sup.wait_state(run, {"COMPLETED", "FAILED", "GAVE_UP"}, timeout=120)
    assert final["state"] == "COMPLETED", sup.status(run)
    _, second = records(tmp_path, "nrl-best")
    staged = tmp_path / "nrl-best" / "results.staged" / run / "attempt-2"
    assert second["resumed_from"] == 10  # best, although step_30 is newer
    assert second["checkpoint_dir"] == second["env_checkpoint_dir"] == str(staged)
    info = staged / "step_10" / "training_info.json"
    assert not (staged / "step_10").is_symlink()  # a hard-linked copy: NeMo RL's retention may rmtree it
    assert info.stat().st_ino == (ck / "step_10" / "training_info.json").stat().st_ino
    assert steps(staged) == ["step_10", "step_20", "step_30", "step_40"]
    assert snapshot(ck) == before  # the original dir: nothing deleted, nothing rewritten
    attempt2 = sup.status(run)["attempt_list"][1]["overrides"]
    assert attempt2["checkpoint_dir"] == str(staged)


REWARD_NAN = """\
rules:
  - name: reward-nan
    description: the reward is NaN
    trigger: {kind: metric, tag: train:reward, condition: nan}
    actions: [{alert: {level: error}}]
"""


def test_tensorboard_only_scalars_feed_metric_rules_across_a_resume(
    sup: DaemonProcess, tmp_path: Path
) -> None:
    """NeMo RL logs scalars only to TensorBoard, one exp_NNN/ per launch: the resumed attempt's new event
    file is read, its NaN reward fires a metric rule, and `status` shows the newest scalars."""
    logs = tmp_path / "nrl-tb" / "logs"
    argv = (f"logger.log_dir={logs}", "--fail-at", "25", "--steps", "30", "--nan-at", "28")
    path, _ = spec(tmp_path, "nrl-tb", *argv, rules=REWARD_NAN, trainer_log_dir=logs)
    run = sup.submit(path)
    final = sup.wait_state(run, {"COMPLETED", "FAILED", "GAVE_UP"}, timeout=120)
    assert final["state"] == "COMPLETED", sup.status(run)
    assert sorted(p.name for p in logs.iterdir()) == ["exp_001", "exp_002"]
    assert not list(logs.rglob("metrics.jsonl"))

    def nan_decisions() -> list[dict[str, Any]]:
        return [d for d in sup.status(run)["decisions"] if d["rule"] == "reward-nan"]

    [d] = wait_for(nan_decisions, timeout=30, what="the reward-nan decision")
    assert d["attempt"] == 2 and "train:reward = nan at step 28" in d["reason"], d

    def metrics() -> Any:
        progress = sup.status(run)["progress"] or {}
        return progress.get("metrics") if progress.get("attempt") == 2 else None

    shown = wait_for(lambda: (m := metrics()) and m.get("step") == 30 and m, timeout=30, what="metrics")
    assert shown["train:reward"] == 1.0 and abs(shown["train:loss"] - 1 / 30) < 1e-6
