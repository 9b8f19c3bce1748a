"""`shepherd rules check` / `shepherd rules test`: what users see when they write and debug rules."""

# ruff: noqa: E501
# (real log lines are long; their shapes matter more than the width)

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from supervisor.cli.main import main
from supervisor.cli.rules import rules_check, rules_list, rules_test
from supervisor.domain.spec import load_spec

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


def test_rules_test_with_no_default_uses_only_the_given_rules(tmp_path: Path) -> None:
    rules = tmp_path / "mine.yaml"
    rules.write_text(
        "rules:\n  - name: saw-info\n    trigger: {kind: log, regex: 'INFO step \\d+'}\n"
        "    actions: [{alert: {level: info}}]\n"
    )
    log = tmp_path / "a.log"
    log.write_text(LOG)
    out = io.StringIO()
    assert rules_test(log, [rules], True, out, use_default=False) == 0
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


SAW_INFO = (
    "rules:\n  - name: saw-info\n    trigger: {kind: log, regex: 'INFO step \\d+', sources: ['ray-*.log']}\n"
    "    actions: [{alert: {level: info}}]\n"
)


def test_rules_files_add_to_the_defaults_as_a_specs_rules_files_do(tmp_path: Path) -> None:
    rules = tmp_path / "mine.yaml"
    rules.write_text(SAW_INFO)
    log = tmp_path / "ray-driver.log"
    log.write_text(LOG)
    out = io.StringIO()
    assert rules_test(log, [rules], True, out) == 0
    assert [r["rule"] for r in json.loads(out.getvalue())] == ["saw-info", "cuda-oom", "node-failure"]


def test_a_specs_rules_are_the_runs_rules_defaults_plus_its_files_minus_disabled(tmp_path: Path) -> None:
    rules = tmp_path / "mine.yaml"
    rules.write_text(SAW_INFO)
    spec = tmp_path / "spec.yaml"
    spec.write_text(f"name: toy\ncommand: ['true']\nrules: {{files: [{rules}], disable: [node-failure]}}\n")
    log = tmp_path / "ray-driver.log"
    log.write_text(LOG)
    out = io.StringIO()
    assert rules_test(log, [], True, out, spec=load_spec(spec)) == 0
    assert [r["rule"] for r in json.loads(out.getvalue())] == ["saw-info", "cuda-oom"]


def test_as_names_the_source_and_the_rules_its_name_keeps_out_are_said(tmp_path: Path) -> None:
    rules = tmp_path / "mine.yaml"
    rules.write_text(SAW_INFO)
    log = tmp_path / "copied.txt"
    log.write_text(LOG)
    out = io.StringIO()
    assert rules_test(log, [rules], False, out, use_default=False) == 0
    assert "no rule fires" in out.getvalue()
    assert (
        "skipped (their `sources` leave out copied.txt" in out.getvalue() and "  saw-info" in out.getvalue()
    )
    out = io.StringIO()
    assert rules_test(log, [rules], False, out, use_default=False, source="ray-driver.log") == 0
    assert "saw-info  line 1  -> alert" in out.getvalue() and "skipped" not in out.getvalue()


def test_rules_test_on_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rules = tmp_path / "mine.yaml"
    rules.write_text(SAW_INFO)
    log = tmp_path / "slurm-77.out"
    log.write_text(LOG)
    assert main(["rules", "test", str(log), "--rules", str(rules), "--as", "ray-driver.log", "--json"]) == 0
    assert [r["rule"] for r in json.loads(capsys.readouterr().out)] == [
        "saw-info",
        "cuda-oom",
        "node-failure",
    ]
    assert main(["rules", "test", "--log", str(log), "--rules", str(rules), "--no-default", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []


def test_rules_list_has_one_row_per_rule_with_its_triggers_and_actions(tmp_path: Path) -> None:
    rules = tmp_path / "mine.yaml"
    rules.write_text(SAW_INFO)
    out = io.StringIO()
    assert rules_list([rules], out) == 0
    header, *rows = out.getvalue().splitlines()
    assert header.split() == ["RULE", "PRI", "TRIGGERS", "ACTIONS"]
    assert any(r.split()[:1] == ["saw-info"] and "log [ray-*.log]" in r and r.endswith("alert") for r in rows)
    node = next(r for r in rows if r.startswith("node-failure "))
    assert "state NODE_FAIL|BOOT_FAIL, log" in node and node.endswith("resume, alert")
    out = io.StringIO()
    assert rules_list([rules], out, use_default=False) == 0
    assert len(out.getvalue().splitlines()) == 2


def test_rules_list_with_a_spec_leaves_out_what_it_disables(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text("name: toy\ncommand: ['true']\nrules: {disable: [node-failure]}\n")
    assert main(["rules", "list", "--spec", str(spec)]) == 0
    out = capsys.readouterr().out
    assert "cuda-oom " in out and "node-failure" not in out
