"""A real hung GRPO run on the dev cluster: our trainer under ray.sub, steps of a few seconds, a
validation longer than the bound learnt for a generation, then the trainer's `hang` fault (its rollout worker
never returns). The learnt bound declares the hang (the validation before it is not flagged),
the stacks are taken from the job's node before the cancel and show the hanging function, and the run resumes
from its checkpoint and completes.

The rule is the shipped one with a floor and history small enough for a test (8 s, 3 samples); the
benchmark (bench/hang_detection.py) covers the shipped values.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.daemon import REPO, DaemonProcess

pytestmark = [pytest.mark.slurm, pytest.mark.ray]

RULES = """\
rules:
  - name: rollouts-stalled
    description: no training progress
    priority: 30
    category: stall
    retryable: true
    max_retries: 2
    trigger:
      kind: stalled
      for: 4m
      keys: [step, rollouts, status, checkpoint, validation]
      learn: {k: 4, floor: 8s, min_samples: 3}
    actions:
      - resume: {from: latest}
      - alert: {level: warning, message: "{run}: stalled"}
"""


def spec(tmp: Path) -> Path:
    logs, ckpt = tmp / "trainer-logs", tmp / "ckpt"
    ckpt.mkdir()
    (tmp / "rules.yaml").write_text(RULES)
    command = [
        "python", "-m", "trainer", "--config", str(REPO / "examples" / "toy-grpo.yaml"),
        # The toy's batch takes tens of ms a phase (a real step takes minutes): `pace` sleeps each phase out
        # to a length the daemon sees (it reads status.json as it is written) and that a loaded machine
        # does not stretch, so the bound learnt from the generations stays the rule's floor (8 s), while
        # the validation, silent, is longer than that bound by a margin; and the test leaves the CPU to
        # the tests beside it. The hang at step 6 comes after 4 generations learnt (steps 2-5, 3 needed).
        "grpo.max_num_steps=6", "grpo.val_period=4", "grpo.val_at_start=false",
        "pace.generation_s=1", "pace.training_s=1", "pace.validation_s=14",
        "checkpointing.save_period=4", f"checkpointing.checkpoint_dir={ckpt}", f"logger.log_dir={logs}",
        "cluster.num_cpus=2", "fault.kind=hang", "fault.at_step=6",
    ]  # fmt: skip
    path = tmp / "hang.yaml"
    path.write_text(
        "\n".join(
            [
                "name: hang",
                f"workdir: {REPO}",
                f"command: {json.dumps(command)}",
                "slurm: {nodes: 1, cpus: 2, mem: 4G, time: '00:20:00'}",
                f"trainer_log_dir: {logs}",
                f"checkpoint: {{dir: {ckpt}, metric: 'val:accuracy', higher_is_better: true}}",
                # Resubmitted, as the name says: stacks, then the cancel (the word that stops a hung driver
                # under the runner is test_rules_resume.py's stall).
                "resume: {backoff_s: 0, pass_checkpoint: ['--resume-from', '{checkpoint}'], in_place: false}",
                f"rules: {{files: [{tmp / 'rules.yaml'}]}}",
            ]
        )
        + "\n"
    )
    return path


@pytest.mark.timeout(1200)
def test_a_hung_trainer_is_found_by_its_rhythm_its_stacks_kept_then_cancelled_and_resumed(
    tmp_path: Path, slurm_cluster: Any, ray_env: dict[str, str]
) -> None:
    d = DaemonProcess(tmp_path / "root", env={**ray_env, "SHEPHERD_FORENSICS__TIMEOUT_S": "30"})
    d.start()
    try:
        run = d.submit(spec(tmp_path))
        final = d.wait_state(run, {"COMPLETED", "FAILED", "GAVE_UP", "CANCELLED"}, timeout=1100)
        status = d.status(run)
        logs = d.cli("logs", run, "--source", "forensics", check=False)
    finally:
        d.stop()
    stalls = [x for x in status["decisions"] if x["rule"] == "rollouts-stalled"]
    assert final["state"] == "COMPLETED", (status, d.log_text()[-3000:])
    # One stall, at the hang: the validation (silent for longer than the hang's bound) was not flagged.
    [stall] = stalls
    ev = stall["evidence"]
    assert stall["attempt"] == 1 and ev["phase"] == "generation", stall
    assert ev["expected_s"] is not None and ev["bound_s"] < 240, (
        stall
    )  # the learnt bound, not the fixed 4 min
    rows = {
        r["step"]: r
        for r in map(json.loads, (tmp_path / "trainer-logs" / "exp_001" / "metrics.jsonl").open())
    }
    validation_s = rows[4]["time"] - rows[3]["time"] - rows[4]["timing/train/total_step_time"]
    assert validation_s > ev["bound_s"], (validation_s, stall)  # silent for longer than a hang's bound
    assert "learnt bound" in stall["reason"] and "at step 5" in stall["reason"]
    assert "cancelled job" in stall["outcome"] and "resuming from step_4" in stall["outcome"]
    first, second = status["attempt_list"][:2]
    assert first["slurm_state"] == "CANCELLED" and second["checkpoint"].endswith("step_4")
    # The stacks were taken before the cancel and show where the rollout worker hangs.
    folder = tmp_path / "root" / "runs" / run / "forensics" / "attempt-1"
    stacks = (folder / "stacks.txt").read_text()
    assert "hang_forever" in stacks, stacks[-3000:]
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["processes"] >= 2 and set(summary["methods"]) <= {"py-spy", "faulthandler"}
    assert any(e["kind"] == "forensics" for e in status["events"])
    assert status["forensics"]["path"] == str(folder)
    assert logs.returncode == 0 and "hang_forever" in logs.stdout
