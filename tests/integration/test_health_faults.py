"""The RL training-health rules on real runs of our trainer on the dev Slurm cluster, the daemon watching.

Each run is the toy GRPO task (examples/toy-grpo.yaml, no Ray: the PLAIN launcher keeps ray.sub's log layout)
with one of the trainer's health faults injected on the first attempt, and the daemon reading the trainer's
metrics.jsonl under Shepherd's names:

* nan: the loss goes NaN at a step (the weights follow); `nan-loss` cancels the job and resumes from the best
  checkpoint saved before that step (by val:accuracy, ties to the newer step), never from one saved after it;
  the resumed attempt runs to the end.
* reward_collapse and kl_blowup: the run keeps going; `reward-collapse` and `policy-mismatch` alert (with the
  metric's history) and change nothing.
* no fault: the healthy toy run completes and no health rule fires.

The NaN run resumes like NeMo RL does (the trainer takes the newest step of its dir; shepherd stages a dir
holding the chosen checkpoint), so the original checkpoint dir stays as attempt 1 left it and the choice can
be checked against it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.daemon import REPO, DaemonProcess

pytestmark = pytest.mark.slurm
PLAIN = REPO / "tests" / "support" / "plain.sub"
HEALTH = {
    "nan-loss",
    "reward-collapse",
    "policy-mismatch",
    "grad-norm-spike",
    "response-length-collapse",
    "response-length-pinned",
    "no-learning-signal",
    "validation-regression",
}
FINAL = {"COMPLETED", "FAILED", "GAVE_UP", "CANCELLED", "LOST"}


@pytest.fixture(scope="module")
def sup(tmp_path_factory: pytest.TempPathFactory, slurm_cluster: Any) -> Any:
    root = tmp_path_factory.mktemp("health-daemon")
    d = DaemonProcess(root / "root", env={**slurm_cluster.env, "SHEPHERD_LAUNCH_SCRIPT": str(PLAIN)})
    d.start()
    yield d
    d.stop()


def spec(tmp: Path, name: str, steps: int, *overrides: str) -> Path:
    ck, logs = tmp / name / "ckpt", tmp / name / "logs"
    ck.mkdir(parents=True)
    command = [
        "python",
        "-m",
        "trainer",
        "--config",
        "examples/toy-grpo.yaml",
        "cluster.ray=false",
        f"grpo.max_num_steps={steps}",
        "grpo.val_period=2",
        "checkpointing.save_period=2",
        "checkpointing.keep_top_k=null",
        f"checkpointing.checkpoint_dir={ck}",
        f"logger.log_dir={logs}",
        "logger.tensorboard_enabled=false",
        "logger.status_interval_s=2",
        *overrides,
    ]
    path = tmp / f"{name}.yaml"
    path.write_text(
        "\n".join(
            [
                f"name: {name}",
                f"command: {json.dumps(command)}",
                f"workdir: {REPO}",
                "slurm: {cpus: 1, time: '00:20:00'}",
                f"trainer_log_dir: {logs}",
                f"checkpoint: {{dir: {ck}, metric: 'val:accuracy'}}",
                "resume: {backoff_s: 0,",
                "         checkpoint_dir_arg: ['checkpointing.checkpoint_dir={checkpoint_dir}']}",
            ]
        )
        + "\n"
    )
    return path


def decisions(sup: DaemonProcess, run: str) -> list[dict[str, Any]]:
    return list(sup.status(run).get("decisions", []))


def final(sup: DaemonProcess, run: str, timeout: float = 600) -> dict[str, Any]:
    return sup.wait_state(run, FINAL, timeout=timeout)


def val_accuracy(step_dir: Path) -> float:
    info = json.loads((step_dir / "training_info.json").read_text())
    return float(info["metrics"]["val/accuracy"])


def test_health_faults_fire_the_nan_rollback_picks_the_best_checkpoint_before_it_and_healthy_runs_stay_quiet(
    sup: DaemonProcess, tmp_path: Path
) -> None:
    nan_at = 33
    runs = {
        "nan": sup.submit(spec(tmp_path, "h-nan", 44, "fault.kind=nan", f"fault.at_step={nan_at}")),
        "collapse": sup.submit(
            spec(tmp_path, "h-collapse", 46, "fault.kind=reward_collapse", "fault.at_step=20")
        ),
        "kl": sup.submit(spec(tmp_path, "h-kl", 24, "fault.kind=kl_blowup", "fault.at_step=8")),
        "healthy": sup.submit(spec(tmp_path, "h-ok", 60)),
    }
    try:
        ends = {k: final(sup, run) for k, run in runs.items()}
    finally:
        for run in runs.values():
            sup.cli("cancel", run, check=False)
    by_rule = {k: {d["rule"]: d for d in decisions(sup, run)} for k, run in runs.items()}

    # NaN: one rollback decision, from the best checkpoint saved before the divergence; the run then finishes
    nan = by_rule["nan"]["nan-loss"]
    assert ends["nan"]["state"] == "COMPLETED", ends["nan"]
    assert nan["attempt"] == 1 and nan["action"] == "resume,alert"
    # the metric reader or the driver log's `train/loss=nan` may see it first (a log line names no step:
    # the rollback then reads the step from the metrics)
    ev = nan["evidence"]
    assert (ev["metric"], ev["step"]) in (("train:loss", nan_at), ("", None)), ev
    original = tmp_path / "h-nan" / "ckpt"
    before = {int(p.name[5:]): p for p in original.glob("step_*") if int(p.name[5:]) < nan_at}
    best = max(before, key=lambda s: (val_accuracy(before[s]), s))  # ties go to the newer step
    assert f"resuming from step_{best} " in nan["outcome"], (
        nan["outcome"],
        {s: val_accuracy(p) for s, p in before.items()},
    )
    staged = next((original.parent / "ckpt.staged").rglob(f"step_{best}"))
    # a hard-linked copy (NeMo RL's retention may rmtree it): the same files as the user's checkpoint
    shared = [(p, before[best] / p.relative_to(staged)) for p in staged.rglob("*") if p.is_file()]
    assert shared and all(a.stat().st_ino == b.stat().st_ino for a, b in shared)
    attempts = sup.status(runs["nan"])["attempt_list"]
    assert len(attempts) == 2  # the rolled-back attempt ran to the end: no second divergence
    log = sup.log_text()
    assert "training diverged: " in log and f"resuming from step {best} as attempt 2" in log

    # Reward collapse and KL blow-up: alerts, nothing else done, the run goes on to the end
    for kind, rule in (("collapse", "reward-collapse"), ("kl", "policy-mismatch")):
        d = by_rule[kind][rule]
        assert ends[kind]["state"] == "COMPLETED", (kind, ends[kind])
        assert d["action"] == "alert" and "alerted" in d["outcome"], d
        assert len(sup.status(runs[kind])["attempt_list"]) == 1
        assert d["evidence"]["lines"], d  # the metric's history went with the alert
    assert by_rule["collapse"]["reward-collapse"]["evidence"]["step"] >= 20
    assert (
        by_rule["kl"]["policy-mismatch"]["evidence"]["step"] > 8
    )  # the perturbed weights sample from step 9
    assert "alert only: nothing was changed" in log

    # The healthy toy run: completed, and no health rule said a word
    assert ends["healthy"]["state"] == "COMPLETED", ends["healthy"]
    assert not HEALTH & set(by_rule["healthy"]), by_rule["healthy"]
