"""Rules and auto-resume on real Slurm jobs: each job prints a real failure signature and exits (or hangs).

One daemon supervises all the runs of this module at once (they run side by side on the dev node), with a
launcher that keeps ray.sub's log layout but skips Ray so each attempt takes seconds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.daemon import REPO, DaemonProcess, wait_for
from tests.support.specs import SLURM, fake_argv, records, write_spec

pytestmark = pytest.mark.slurm
PLAIN = REPO / "tests" / "support" / "plain.sub"


@pytest.fixture(scope="module")
def sup(tmp_path_factory: pytest.TempPathFactory, slurm_cluster: Any) -> Any:
    root = tmp_path_factory.mktemp("rules-daemon")
    d = DaemonProcess(root / "root", env={**slurm_cluster.env, "SHEPHERD_LAUNCH_SCRIPT": str(PLAIN)})
    d.start()
    yield d
    d.stop()


def spec(tmp: Path, name: str, kind: str, *extra: str, rules: str = "", resume: str = "", **top: str) -> Path:
    argv = fake_argv(tmp, name, kind, *extra)
    return write_spec(
        tmp, name, argv, rules=rules, resume=resume, shared_cache_dir=tmp / "shared-cache", **top
    )


def decisions(sup: DaemonProcess, run: str) -> list[dict[str, Any]]:
    return [
        d
        for d in sup.status(run).get("decisions", [])
        if d["action"] != "none" and d["rule"] != "run-completed"
    ]


@pytest.mark.parametrize(
    ("kind", "rule"),
    [
        ("cuda-oom", "cuda-oom"),
        ("nccl", "nccl-error"),
        ("preempted", "slurm-preempted"),
        ("host-oom", "host-oom"),
        ("actor-died", "ray-actor-died"),
        ("ray-startup", "ray-startup-failed"),
        ("vllm-dead", "vllm-engine-dead"),
    ],
)
def test_a_retryable_failure_is_resumed_from_the_newest_checkpoint(
    sup: DaemonProcess, tmp_path: Path, kind: str, rule: str
) -> None:
    run = sup.submit(spec(tmp_path, f"r-{kind}", kind))
    final = sup.wait_state(run, {"COMPLETED", "FAILED", "GAVE_UP"}, timeout=120)
    assert final["state"] == "COMPLETED", sup.status(run)
    assert final["attempts"] == 2
    [d] = decisions(sup, run)
    assert d["rule"] == rule and d["attempt"] == 1
    assert "resuming from step_10" in d["outcome"]
    first, second = records(tmp_path, f"r-{kind}")
    assert "--resume-from" not in first["argv"]
    assert second["argv"][-2:] == ["--resume-from", str(tmp_path / f"r-{kind}" / "ckpt" / "step_10")]


def test_hf_cache_failure_resumes_with_a_shared_hf_home(sup: DaemonProcess, tmp_path: Path) -> None:
    run = sup.submit(spec(tmp_path, "r-hf", "hf-cache"))
    final = sup.wait_state(run, {"COMPLETED", "FAILED", "GAVE_UP"}, timeout=120)
    assert final["state"] == "COMPLETED", sup.status(run)
    [d] = decisions(sup, run)
    assert d["rule"] == "hf-cache-not-shared"
    assert f"HF_HOME={tmp_path / 'shared-cache'}/huggingface" in d["outcome"]
    first, second = records(tmp_path, "r-hf")
    assert first["hf_home"] is None
    assert second["hf_home"] == f"{tmp_path / 'shared-cache'}/huggingface"


def test_a_harmless_log_fires_nothing(sup: DaemonProcess, tmp_path: Path) -> None:
    run = sup.submit(spec(tmp_path, "r-quiet", "harmless"))
    final = sup.wait_state(run, {"COMPLETED", "FAILED", "GAVE_UP"}, timeout=120)
    assert final["state"] == "COMPLETED" and final["attempts"] == 1
    assert decisions(sup, run) == []


def test_a_budget_of_two_stops_the_third_resume(sup: DaemonProcess, tmp_path: Path) -> None:
    # In place (the default): each driver run fails within a second of its start, in the one driver log the
    # job's runs share; the runner's `driver run K starting` line hands what follows to attempt K.
    run = sup.submit(spec(tmp_path, "r-budget", "nccl", "--always", resume="max_attempts: 3"))
    final = sup.wait_state(run, {"COMPLETED", "FAILED", "GAVE_UP"}, timeout=180)
    assert final["state"] == "GAVE_UP", sup.status(run)
    assert final["attempts"] == 3
    outcomes = [d["outcome"] for d in decisions(sup, run)]
    assert len(outcomes) == 3 and all("resuming" in o for o in outcomes[:2])
    assert "gave up" in outcomes[2] and "budget" in outcomes[2]


NON_RETRYABLE = """\
rules:
  - name: bad-dataset
    description: the dataset path is wrong; retrying will not help
    priority: 95
    category: failure
    retryable: false
    trigger: {kind: log, regex: "Pretrained run config not found"}
    actions:
      - give_up: {reason: "dataset missing"}
      - alert: {level: error, message: "{run}: {rule}: {excerpt}"}
"""


def test_a_non_retryable_rule_alerts_and_stops(sup: DaemonProcess, tmp_path: Path) -> None:
    run = sup.submit(spec(tmp_path, "r-stop", "hf-cache", rules=NON_RETRYABLE))
    final = sup.wait_state(run, {"COMPLETED", "FAILED", "GAVE_UP"}, timeout=120)
    assert final["state"] == "GAVE_UP" and final["attempts"] == 1
    [d] = decisions(sup, run)
    assert d["rule"] == "bad-dataset" and "gave up" in d["outcome"]


STALL = """\
rules:
  - name: rollouts-stalled
    description: rollout collection stopped moving
    priority: 40
    category: stall
    trigger: {kind: stalled, for: 4s}
    actions:
      - resume: {from: latest}
      - alert: {level: warning, message: "{run}: rollouts stalled"}
"""


def test_a_stall_is_detected_while_the_job_keeps_running(sup: DaemonProcess, tmp_path: Path) -> None:
    """The hung driver is stopped by the runner (the word came while it ran) and runs again in place."""
    run = sup.submit(spec(tmp_path, "r-stall", "harmless", "--hang", rules=STALL))
    final = sup.wait_state(run, {"COMPLETED", "FAILED", "GAVE_UP"}, timeout=120)
    assert final["state"] == "COMPLETED", sup.status(run)
    [d] = decisions(sup, run)
    assert d["rule"] == "rollouts-stalled" and "in place: driver run 2 of Slurm job" in d["outcome"]
    first, second = sup.status(run)["attempt_list"]
    assert first["job_id"] == second["job_id"] and second["slurm_state"] == "COMPLETED"


def test_a_stall_without_restart_in_place_cancels_the_job_and_resubmits(
    sup: DaemonProcess, tmp_path: Path
) -> None:
    run = sup.submit(
        spec(tmp_path, "r-stall-off", "harmless", "--hang", rules=STALL, resume="in_place: false")
    )
    final = sup.wait_state(run, {"COMPLETED", "FAILED", "GAVE_UP"}, timeout=120)
    assert final["state"] == "COMPLETED", sup.status(run)
    [d] = decisions(sup, run)
    assert d["rule"] == "rollouts-stalled" and "cancelled job" in d["outcome"]
    first, second = sup.status(run)["attempt_list"]
    assert first["slurm_state"] == "CANCELLED" and first["job_id"] != second["job_id"]


@pytest.mark.parametrize(("kind", "rule"), [("node-failure", "node-failure"), ("ecc", "cuda-hardware-error")])
def test_a_failing_node_is_excluded_from_the_resume(
    sup: DaemonProcess, slurm_cluster: Any, tmp_path: Path, kind: str, rule: str
) -> None:
    node = slurm_cluster.nodes()[0]  # node1 (22.05), v2411n1 (24.11)
    run = sup.submit(spec(tmp_path, "r-node", kind))
    final = sup.wait_state(run, {"COMPLETED", "FAILED", "GAVE_UP"}, timeout=120)
    [d] = decisions(sup, run)
    assert d["rule"] == rule and f"--exclude={node}" in d["outcome"]
    assert final["attempts"] == 2
    assert sup.status(run)["attempt_list"][1]["overrides"]["exclude"] == [node]
    # The dev cluster has one node: Slurm refuses a job that excludes it, and the run says so.
    assert final["state"] == "FAILED" and "Requested node configuration is not available" in final["reason"]


QOS_SOON = """\
rules:
  - name: qos-pending
    description: the job waits on a QOS, association or partition limit, not on free resources
    priority: 20
    category: pending
    retryable: false
    trigger: {kind: pending, reason: "QOS\\\\w*Limit|PartitionTimeLimit", for: 3s}
    actions:
      - alert: {level: warning, message: "{run}: still pending: {reason}"}
"""


def test_a_limit_pending_reason_fires_after_its_duration(sup: DaemonProcess, tmp_path: Path) -> None:
    # The `small` partition's MaxTime is 2 minutes: a 5-minute job pends with PartitionTimeLimit for ever.
    path = spec(tmp_path, "r-qos", "harmless", rules=QOS_SOON)
    path.write_text(path.read_text().replace(SLURM, "slurm: {cpus: 1, time: '00:05:00', partition: small}"))
    run = sup.submit(path)
    d = wait_for(lambda: next(iter(decisions(sup, run)), None), 60, what="a pending decision")
    status = sup.status(run)
    assert status["state"] == "PENDING" and status["pending_reason"] == "PartitionTimeLimit"
    assert d["rule"] == "qos-pending" and "PartitionTimeLimit" in d["reason"] + d["outcome"] + str(
        d["evidence"]
    )
    sup.cli("cancel", run)


def test_a_real_time_limit_resumes_the_chain(sup: DaemonProcess, tmp_path: Path) -> None:
    # Slurm's own TIMEOUT (a 1-minute limit is enforced after ~80 s on the dev cluster).
    path = spec(tmp_path, "r-time", "harmless", "--sleep", "300")
    path.write_text(path.read_text().replace("time: '00:10:00'", "time: '1'"))
    run = sup.submit(path)
    final = sup.wait_state(run, {"COMPLETED", "FAILED", "GAVE_UP"}, timeout=240)
    assert final["state"] == "COMPLETED", sup.status(run)
    [d] = decisions(sup, run)
    assert d["rule"] == "slurm-time-limit" and "resuming from step_10" in d["outcome"]
    assert sup.status(run)["attempt_list"][0]["slurm_state"] == "TIMEOUT"
