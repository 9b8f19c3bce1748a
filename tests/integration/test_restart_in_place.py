"""Restart in place on real Slurm (issue 31): the driver runs under Shepherd's job-side runner, and a crash a
rule resumes runs again inside the same Slurm job, from the latest checkpoint, with no new sbatch.

The launcher here is tests/support/plain.sub (ray.sub's log layout, no Ray) so each case takes seconds; the
runner runs wherever the launcher runs the driver, so ray.sub's Ray would stay up the same way.
"""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from supervisor.slurm.launchers import runner
from tests.support.daemon import REPO, DaemonProcess, wait_for
from tests.support.specs import fake_argv, records, write_spec

from .conftest import SlurmCluster

pytestmark = pytest.mark.slurm
PLAIN = REPO / "tests" / "support" / "plain.sub"
FINAL = {"COMPLETED", "FAILED", "GAVE_UP", "CANCELLED"}


@pytest.fixture
def sup(tmp_path: Path, slurm_cluster: SlurmCluster) -> Any:
    d = DaemonProcess(tmp_path / "root", env={**slurm_cluster.env, "SHEPHERD_LAUNCH_SCRIPT": str(PLAIN)})
    d.start()
    yield d
    d.stop()


def in_place_spec(tmp: Path, name: str, *extra: str, wait_s: int = 60) -> Path:
    argv = fake_argv(tmp, name, "cuda-oom", *extra)
    return write_spec(tmp, name, argv, resume=f"in_place: true, in_place_wait_s: {wait_s}")


def attempts(sup: DaemonProcess, run: str) -> list[dict[str, Any]]:
    return list(sup.status(run)["attempt_list"])


def test_a_crash_a_rule_resumes_restarts_inside_the_same_job_from_the_latest_checkpoint(
    sup: DaemonProcess, tmp_path: Path
) -> None:
    run = sup.submit(in_place_spec(tmp_path, "ip"))
    final = sup.wait_state(run, FINAL, timeout=80)
    assert final["state"] == "COMPLETED", sup.status(run)
    first, second = attempts(sup, run)
    assert first["job_id"] == second["job_id"]  # one Slurm job: no second sbatch
    assert second["tag"].startswith("inplace:1:") and second["overrides"]["driver_run"] == 2
    assert first["exit_code"] == 1 and first["reason"].startswith("attempt 2 restarted in place")
    [d] = [d for d in sup.status(run)["decisions"] if d["rule"] == "cuda-oom"]
    assert "in place: driver run 2 of Slurm job" in d["outcome"]
    one, two = records(tmp_path, "ip")
    assert one["job"] == two["job"] == first["job_id"]
    assert two["argv"][-2:] == ["--resume-from", str(tmp_path / "ip" / "ckpt" / "step_10")]
    shown = sup.cli("logs", run, "--attempt", "2").stdout  # one job's log, this driver run's part of it
    assert "attempt 2 starting" in shown and "CUDA out of memory" not in shown
    assert "CUDA out of memory" in sup.cli("logs", run, "--attempt", "1").stdout


def test_a_crash_no_rule_knows_after_a_new_checkpoint_restarts_in_place_too(
    sup: DaemonProcess, tmp_path: Path
) -> None:
    """The unrecognised failure's resume-once is decided from the runner's exit report while the job still
    runs, so it keeps the allocation like a rule's resume."""
    argv = fake_argv(tmp_path, "odd", "silent")  # saves step_10, then exits 1 without a word
    run = sup.submit(write_spec(tmp_path, "odd", argv, resume="in_place_wait_s: 60"))
    final = sup.wait_state(run, FINAL, timeout=80)
    assert final["state"] == "COMPLETED", sup.status(run)
    first, second = attempts(sup, run)
    assert first["job_id"] == second["job_id"] and second["overrides"]["driver_run"] == 2
    [d] = [d for d in sup.status(run)["decisions"] if d["rule"] == "unrecognised-failure"]
    assert "while its job runs" in d["reason"] and "it saved step_10 first" in d["reason"]
    assert "in place: driver run 2 of Slurm job" in d["outcome"]


def test_a_runner_whose_shepherd_never_answers_ends_the_job_after_its_bound(
    tmp_path: Path, slurm_cluster: SlurmCluster
) -> None:
    script = tmp_path / "runner.sh"
    script.write_text(runner.script_text())
    env = {**slurm_cluster.env, "BASE_LOG_DIR": str(tmp_path), runner.ENV_WAIT: "2"}
    done = subprocess.run(
        ["sbatch", "--wait", "--parsable", f"--output={tmp_path}/slurm-%j.out", f"--chdir={tmp_path}",
         str(PLAIN), "sh", str(script), "sh", "-c", "echo crashed; exit 3"],
        env=env, capture_output=True, text=True, timeout=80, check=False,
    )  # fmt: skip
    job = done.stdout.strip().split(";")[0]
    assert done.returncode == 3, done.stderr
    driver_log = (tmp_path / f"{job}-logs" / "ray-driver.log").read_text()
    assert "crashed" in driver_log
    assert "no word from Shepherd within 2s: ending the job with the driver's code 3" in driver_log
    ended = (runner.runner_dir(tmp_path, job) / "ended").read_text().splitlines()
    assert ended == ["run=1", "code=3", "why=bound", "end"]


def test_a_daemon_killed_while_the_runner_waits_picks_the_conversation_up_after_its_restart(
    sup: DaemonProcess, tmp_path: Path
) -> None:
    run = sup.submit(in_place_spec(tmp_path, "ip-restart", "--sleep", "6"))
    wait_for(lambda: sup.status(run).get("slurm_state") == "RUNNING", 60, 0.3, "the job running")
    job = sup.status(run)["slurm_job_id"]
    sup.stop(signal.SIGKILL)  # the driver crashes while nobody listens
    d = sup.root / "runs" / run / "logs"
    report = runner.runner_dir(d, runner.runner_key(1, run)) / "exit-1"  # named after the run and attempt
    wait_for(report.exists, 60, 0.3, "the runner's exit report")
    sup.start()
    final = sup.wait_state(run, FINAL, timeout=80)
    assert final["state"] == "COMPLETED", sup.status(run)
    first, second = attempts(sup, run)
    assert first["job_id"] == second["job_id"] == job
    assert [r["job"] for r in records(tmp_path, "ip-restart")] == [job, job]
