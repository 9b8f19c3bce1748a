"""The daemon end to end on the real dev Slurm cluster: submit, track, fail, crash, controller outage.

These are about Slurm's side of a job, so their jobs run under tests/support/plain.sub (ray.sub's log layout,
no Ray): a Ray head costs ~10 s of CPU, one cannot start in a job whose memory limit is the test's subject,
and a Ray here would be a Ray user outside the Ray lock, which NeMo RL's ray.sub (`ray stop`) kills. A spec
through our launcher with Ray is test_ray_launch.py's hello-ray."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.daemon import REPO, DaemonProcess, wait_for

pytestmark = pytest.mark.slurm
NOT_ENDED = (None, "PENDING", "CONFIGURING", "RUNNING", "COMPLETING")
PLAIN = REPO / "tests" / "support" / "plain.sub"


def write_spec(path: Path, name: str, command: str, **slurm: Any) -> Path:
    lines = [
        f"name: {name}",
        f"command: {command}",
        f"workdir: {REPO}",
        "slurm:",
        "  cpus: 1",
        '  time: "00:10:00"',
    ]
    lines += [f"  {k}: {v}" for k, v in slurm.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def squeue_names(env: dict[str, str]) -> list[str]:
    out = subprocess.run(
        ["squeue", "-h", "-t", "all", "-o", "%j"], env=env, capture_output=True, text=True, check=True
    )
    return out.stdout.split()


@pytest.fixture
def daemon(tmp_path: Path, slurm_cluster: Any) -> Any:
    d = DaemonProcess(tmp_path / "root", env={**slurm_cluster.env, "SHEPHERD_LAUNCH_SCRIPT": str(PLAIN)})
    yield d
    d.stop()


def test_a_failing_job_ends_failed_with_its_exit_code(daemon: DaemonProcess, tmp_path: Path) -> None:
    daemon.start()
    run = daemon.submit(write_spec(tmp_path / "fail.yaml", "fails", '"echo about to fail; exit 3"'))
    final = daemon.wait_state(run, {"FAILED", "COMPLETED"}, timeout=180)
    assert final["state"] == "FAILED"
    assert final["exit_code"] == 3


def test_a_pending_reason_is_reported_while_pending_and_cancel_works(
    daemon: DaemonProcess, tmp_path: Path
) -> None:
    daemon.start()
    spec = write_spec(tmp_path / "later.yaml", "later", '["sleep", "5"]', extra_args='["--begin=now+3600"]')
    run = daemon.submit(spec)
    pending = wait_for(lambda: (s := daemon.status(run)).get("pending_reason") and s, 60, what="pending")
    assert pending["state"] == "PENDING" and pending["pending_reason"] == "BeginTime"
    assert "BeginTime" in daemon.cli("status").stdout
    daemon.cli("cancel", run)
    assert daemon.wait_state(run, "CANCELLED")["state"] == "CANCELLED"


def test_hold_and_release_reach_the_pending_job_and_the_run(
    daemon: DaemonProcess, tmp_path: Path, slurm_cluster: Any
) -> None:
    daemon.start()
    spec = write_spec(tmp_path / "held.yaml", "held", '["sleep", "5"]', extra_args='["--begin=now+3600"]')
    run = daemon.submit(spec)
    job = wait_for(
        lambda: daemon.status(run).get("pending_reason") and daemon.status(run)["slurm_job_id"], 60
    )
    daemon.cli("hold", run)
    assert daemon.status(run)["held"] is True
    assert slurm_cluster.job_state(job)[1].startswith("JobHeld")
    assert daemon.wait_state(run, "HELD")["state"] == "HELD"
    daemon.cli("release", run)
    state, reason = slurm_cluster.job_state(job)  # reason: BeginTime once the scheduler looked again
    assert state == "PENDING" and not reason.startswith("JobHeld"), reason
    released = wait_for(lambda: (s := daemon.status(run))["state"] == "PENDING" and s, 60, what="released")
    assert released["held"] is False
    daemon.cli("cancel", run)
    assert daemon.wait_state(run, "CANCELLED")["state"] == "CANCELLED"


def test_a_job_over_its_memory_ends_out_of_memory_and_host_oom_decides(
    daemon: DaemonProcess, tmp_path: Path, slurm_cluster: Any
) -> None:
    daemon.start()
    # `tail` holds 500 MB (no newline in /dev/zero) and the job ends with it: bounded, should no kill come.
    eat = '"head -c 500M /dev/zero | tail"'
    run = daemon.submit(write_spec(tmp_path / "oom.yaml", "oom", eat, mem="100M"))

    def decided_and_ended() -> Any:
        # The rule may decide on the log line before Slurm's final word on the job: wait for both.
        s = daemon.status(run)
        rule = any(d["rule"] == "host-oom" and d["attempt"] == 1 for d in s.get("decisions", []))
        return rule and s["attempt_list"][0]["slurm_state"] not in NOT_ENDED and s

    s = wait_for(decided_and_ended, 120, what="host-oom decided on attempt 1, and its end")
    first = s["attempt_list"][0]
    # cgroups: the kernel's OOM kill, OUT_OF_MEMORY (0:125); without them Slurm's own kill, FAILED (0:9). The
    # rule may decide on slurmstepd's OOM line while the job is still completing: its resume then cancels it.
    cgroup = (Path(slurm_cluster.conf).parent.parent / "run" / "cgroup").read_text().strip() == "1"
    ended = "OUT_OF_MEMORY" if cgroup else "FAILED"
    assert first["slurm_state"] in (ended, "CANCELLED"), s
    if first["slurm_state"] == ended:
        assert (first["exit_code"], first["exit_signal"]) == ((0, 125) if cgroup else (0, 9)), s
    [d] = [d for d in s["decisions"] if d["rule"] == "host-oom"]
    assert "resume" in d["action"], d  # retried once from its checkpoint (after the backoff)
    daemon.cli("cancel", run, check=False)


def test_sigkill_between_sbatch_and_commit_leaves_exactly_one_job(
    daemon: DaemonProcess, tmp_path: Path, slurm_cluster: Any
) -> None:
    daemon.start(extra_env={"SHEPHERD_CRASH_AT": "after-sbatch"})
    run = daemon.submit(write_spec(tmp_path / "once.yaml", "once", '["sleep", "3"]'))
    assert daemon.wait_exit(60) == -9  # it really died right after sbatch returned
    names = [n for n in squeue_names(slurm_cluster.env) if n.startswith(f"shep-{run}-")]
    assert names == [f"shep-{run}-a1"]
    daemon.proc = None
    daemon.start()
    final = daemon.wait_state(run, "COMPLETED", timeout=120)
    assert final["attempts"] == 1
    names = [n for n in squeue_names(slurm_cluster.env) if n.startswith(f"shep-{run}-")]
    assert names == [f"shep-{run}-a1"]
    assert "found by its tag after a restart" in " ".join(e["message"] for e in daemon.status(run)["events"])


def test_slurmctld_outage_marks_nothing_failed_and_tracking_resumes(
    daemon: DaemonProcess, tmp_path: Path, slurm_cluster: Any
) -> None:
    daemon.start()
    run = daemon.submit(write_spec(tmp_path / "long.yaml", "long", '["sleep", "40"]'))
    daemon.wait_state(run, "RUNNING", timeout=60)
    slurm_cluster.ctld_stop()
    try:
        wait_for(lambda: "cannot see slurm" in daemon.log_text(), 60, 0.5, "the first failed poll")
        # The outage itself is the behaviour: through two more failed polls (each squeue takes ~9 s to give
        # up) every look at the run finds it RUNNING, never failed or lost.
        outage_ends = time.monotonic() + 18
        while time.monotonic() < outage_ends:
            s = daemon.status(run)
            assert s["state"] == "RUNNING", s
            time.sleep(1)
    finally:
        slurm_cluster.ctld_start()
    assert daemon.wait_state(run, "COMPLETED", timeout=120)["attempts"] == 1
    assert "cannot see slurm" in daemon.log_text()


def test_slurmctld_sigkill_loses_nothing_of_ours_and_a_reused_job_id_is_not_confused(
    tmp_path: Path, slurm_cluster: Any
) -> None:
    """slurmctld killed right after a submission may forget that job and hand its id to the next one.

    The second spec is submitted seconds after the restart, when `sbatch --test-only` still refuses what
    sbatch queues (`Requested node configuration is not available`): this test is about the daemon across
    the crash, so its preflight asks no --test-only."""
    env = {
        **slurm_cluster.env,
        "SHEPHERD_LAUNCH_SCRIPT": str(PLAIN),
        "SHEPHERD_SLURM__UNKNOWN_GRACE_S": "10",
        "SHEPHERD_PREFLIGHT__TEST_ONLY": "false",
    }
    d = DaemonProcess(tmp_path / "root", env=env)
    d.start()
    try:
        later = d.submit(
            write_spec(tmp_path / "b.yaml", "maybe-lost", '["sleep", "2"]', extra_args='["--begin=now+3600"]')
        )
        job_b = wait_for(lambda: d.status(later).get("slurm_job_id"), 60, what="b submitted")
        slurm_cluster.ctld_stop(kill=True)
        slurm_cluster.ctld_start()
        after = d.submit(write_spec(tmp_path / "c.yaml", "after-crash", '["sleep", "2"]'))
        c = d.wait_state(after, {"COMPLETED", "FAILED", "LOST"}, timeout=120)
        assert c["state"] == "COMPLETED" and c["attempts"] == 1
        still_there = f"shep-{later}-a1" in squeue_names(slurm_cluster.env)
        if still_there:
            b = d.status(later)
            assert b["state"] == "PENDING" and b["slurm_job_id"] == job_b
        else:  # Slurm forgot b's job: after the grace period b says so; it never takes c's job for its own
            b = d.wait_state(later, {"LOST", "FAILED", "COMPLETED"}, timeout=60)
            assert b["state"] == "LOST" and "vanished" in b["reason"]
        assert b["attempts"] == 1
        d.cli("cancel", later, check=False)
    finally:
        d.stop()
