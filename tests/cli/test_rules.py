"""`shepherd rules check` / `shepherd rules test`: what users see when they write and debug rules."""

# ruff: noqa: E501
# (real log lines are long; their shapes matter more than the width)

from __future__ import annotations

import io
import json
from pathlib import Path

from supervisor.cli.rules import rules_check, rules_test

LOG = """\x1b[36m(DTensorPolicyWorker[rank=0] pid=2812, ip=10.0.0.12)\x1b[0m INFO step 3: loss=0.12
[36m(RayWorkerWrapper pid=88, ip=10.0.0.2)[0m WARNING To avoid out-of-memory errors, lower gpu_memory_utilization
node3:1:2 [0] NCCL INFO NET/IB : No device found.
Traceback (most recent call last):
  File "/opt/nemo_rl/algorithms/grpo.py", line 512, in grpo_train
    train_results = policy.train(train_data, loss_fn)
(DTensorPolicyWorker pid=2812, ip=10.0.0.12) ray.exceptions.RayTaskError(OutOfMemoryError): ray::DTensorPolicyWorker.train() (pid=2812, ip=10.0.0.12)
  File "/opt/nemo_rl/models/policy/dtensor_policy_worker.py", line 700, in train
    loss.backward()
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.
ray.exceptions.RayActorError: The actor died unexpectedly before finishing this task.
Collecting rollouts:  3%|3| 64/2048\rCollecting rollouts:  4%|4| 80/2048
slurmstepd: error: *** JOB 77 ON node1 CANCELLED AT 2026-11-21T10:00:00 DUE TO NODE FAILURE ***
"""


def test_rules_test_prints_rule_lines_and_action(tmp_path: Path) -> None:
    log = tmp_path / "slurm-77.out"
    log.write_bytes(LOG.encode() + b"\xff\xfe broken utf-8\n")
    out = io.StringIO()
    assert rules_test(log, [], False, out) == 0
    text = out.getvalue()
    assert "cuda-oom  line 4-7  -> resume, alert  node 10.0.0.12" in text
    assert "~ ray-actor-died  line 11  (part of the cuda-oom incident, no action)" in text
    assert "node-failure  line 13  -> resume, alert  node node1  supersedes cuda-oom" in text


def test_rules_test_json(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    log.write_text(LOG)
    out = io.StringIO()
    assert rules_test(log, [], True, out) == 0
    rows = json.loads(out.getvalue())
    assert [(r["rule"], r["action"], r["line"]) for r in rows] == [
        ("cuda-oom", "resume,alert", 7),
        ("node-failure", "resume,alert", 13),
    ]


def test_rules_test_with_custom_rules_only(tmp_path: Path) -> None:
    rules = tmp_path / "mine.yaml"
    rules.write_text(
        "rules:\n  - name: saw-info\n    trigger: {kind: log, regex: 'INFO step \\d+'}\n"
        "    actions: [{alert: {level: info}}]\n"
    )
    log = tmp_path / "a.log"
    log.write_text(LOG)
    out = io.StringIO()
    assert rules_test(log, [rules], True, out) == 0
    assert json.loads(out.getvalue()) == [
        {
            "rule": "saw-info",
            "action": "alert",
            "line": 1,
            "supersedes": [],
            "signature": "saw-info:INFO step N",
        }
    ]


def test_rules_test_reports_bad_rules_and_missing_log(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("rules:\n  - name: x\n    trigger: {kind: log, regex: '('}\n    actions: [hold]\n")
    out = io.StringIO()
    assert rules_test(tmp_path / "a.log", [bad], False, out) == 2
    assert f"{bad}:3: rules.0.trigger.regex: invalid regex" in out.getvalue()
    out2 = io.StringIO()
    assert rules_test(tmp_path / "missing.log", [], False, out2) == 2


def test_rules_check_exit_codes(tmp_path: Path) -> None:
    out = io.StringIO()
    assert rules_check([], out) == 0 and out.getvalue().startswith("ok:")
    bad = tmp_path / "bad.yaml"
    bad.write_text("rules:\n  - name: x\n    triggr: {kind: log, regex: a}\n    actions: [hold]\n")
    out = io.StringIO()
    assert rules_check([bad], out) == 1
    assert f"{bad}:3: rules.0.triggr: unknown key" in out.getvalue()
