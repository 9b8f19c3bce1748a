"""ray.sub on the real dev cluster: one Ray cluster per job; the job exits as its driver does."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.daemon import DaemonProcess

from .conftest import RAY_SUB, REPO, SlurmCluster

pytestmark = [pytest.mark.slurm, pytest.mark.ray]

HELLO = ["python", str(REPO / "examples" / "hello_ray.py")]


def submit_ray(cluster: SlurmCluster, tmp: Path, *driver: str, sbatch: tuple[str, ...] = ()) -> str:
    return cluster.sbatch(
        "-c",
        "2",
        "--mem=2000",
        "--time=10",
        "-o",
        str(tmp / "%j.out"),
        *sbatch,
        str(RAY_SUB),
        *driver,
        cwd=tmp,
    )


def test_hello_ray_runs_to_completion_with_logs_and_sentinel(
    slurm_cluster: SlurmCluster, ray_env: dict[str, str], tmp_path: Path
) -> None:
    job = submit_ray(slurm_cluster, tmp_path, *HELLO, sbatch=("--gres=gpu:1",))
    assert slurm_cluster.wait_final(job, timeout=180) == "COMPLETED", (tmp_path / f"{job}.out").read_text()
    assert slurm_cluster.exit_code(job) == "0:0"
    logs = tmp_path / f"{job}-logs"
    assert (logs / "STARTED_RAY_HEAD").exists() and (logs / "ENDED").exists()
    head = (logs / "ray-head.log").read_text()
    assert "gpus=1" in head and "cpus=2" in head
    assert "HELLO-RAY-OK" in (logs / "ray-driver.log").read_text()
    assert "examples/hello_ray.py" in (logs / "driver_command.sh").read_text()


def test_a_failing_driver_fails_the_job_with_its_exit_code(
    slurm_cluster: SlurmCluster, ray_env: dict[str, str], tmp_path: Path
) -> None:
    job = submit_ray(slurm_cluster, tmp_path, "bash", "-c", "echo driver-ran; exit 3")
    assert slurm_cluster.wait_final(job, timeout=180) == "FAILED"
    assert slurm_cluster.exit_code(job) == "3:0"
    logs = tmp_path / f"{job}-logs"
    assert (logs / "STARTED_RAY_HEAD").exists()
    assert "driver-ran" in (logs / "ray-driver.log").read_text()


def test_ray_that_never_starts_fails_clearly_without_sentinel(
    slurm_cluster: SlurmCluster, ray_env: dict[str, str], tmp_path: Path
) -> None:
    job = submit_ray(slurm_cluster, tmp_path, *HELLO, sbatch=("--export=ALL,SHEPHERD_RAY_BIN=/bin/false",))
    assert slurm_cluster.wait_final(job, timeout=120) == "FAILED"
    assert slurm_cluster.exit_code(job) == "97:0"
    logs = tmp_path / f"{job}-logs"
    assert not (logs / "STARTED_RAY_HEAD").exists()
    assert "RAY STARTUP FAILED" in (logs / "ray-head.log").read_text()
    assert "RAY STARTUP FAILED" in (tmp_path / f"{job}.out").read_text()


STUB_RAY = """#!/bin/bash
# A Ray whose first head start finds its GCS port taken (Ray's gcs_server's words), and whose next one starts.
if [[ $1 == start && " $* " == *" --head "* ]]; then
    port=$(grep -o -- '--port=[0-9]*' <<< "$*" | cut -d= -f2)
    if mkdir "$(dirname "$0")/first-try" 2>/dev/null; then
        echo "Check failed: server_ Failed to start the grpc server. The specified port is $port."
        exit 1
    fi
    echo "Ray runtime started."
    exec sleep 300
fi
"""


def test_a_head_whose_port_was_taken_after_the_check_starts_again_on_the_next_free_block(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    ray = tmp_path / "ray"
    ray.write_text(STUB_RAY)
    ray.chmod(0o755)
    job = submit_ray(
        slurm_cluster,
        tmp_path,
        "bash",
        "-c",
        "echo address=$RAY_ADDRESS",
        sbatch=(f"--export=ALL,SHEPHERD_RAY_BIN={ray}",),
    )
    out = tmp_path / f"{job}.out"
    assert slurm_cluster.wait_final(job, timeout=120) == "COMPLETED", out.read_text()
    logs = tmp_path / f"{job}-logs"
    head = (logs / "ray-head.log").read_text()
    taken = int(head.split("The specified port is ")[1].split(".")[0])
    assert "Ray runtime started." in head.split("The specified port is ")[1]  # the second try, appended
    used = int((logs / "ray-driver.log").read_text().split("address=")[1].split(":")[1])
    assert used != taken and (used - 20000) % 100 == 0
    assert f"a port of block {taken} was taken" in out.read_text()


def test_two_ray_jobs_on_one_node_both_complete(
    slurm_cluster: SlurmCluster, ray_env: dict[str, str], tmp_path: Path
) -> None:
    node = slurm_cluster.nodes()[0]
    jobs = [submit_ray(slurm_cluster, tmp_path, *HELLO, sbatch=("-w", node)) for _ in range(2)]
    for job in jobs:
        assert slurm_cluster.wait_final(job, timeout=240) == "COMPLETED", (
            tmp_path / f"{job}.out"
        ).read_text()
        assert "HELLO-RAY-OK" in (tmp_path / f"{job}-logs" / "ray-driver.log").read_text()
    addresses = {
        next(x for x in (tmp_path / f"{j}.out").read_text().split() if x.startswith("address=")) for j in jobs
    }
    assert len(addresses) == 2  # each job had its own GCS


def test_a_requeued_job_logs_to_a_restart_folder(
    slurm_cluster: SlurmCluster, ray_env: dict[str, str], tmp_path: Path
) -> None:
    job = submit_ray(
        slurm_cluster, tmp_path, "bash", "-c", "sleep 300", sbatch=("--requeue", "--open-mode=append")
    )
    logs = tmp_path / f"{job}-logs"
    _wait_for(lambda: (logs / "STARTED_RAY_HEAD").exists(), 120)
    slurm_cluster.run("scontrol", "requeue", job)
    restarted = tmp_path / f"{job}-1-logs"
    _wait_for(lambda: (restarted / "STARTED_RAY_HEAD").exists(), 240)
    slurm_cluster.run("scancel", job)
    assert slurm_cluster.wait_final(job, timeout=60) == "CANCELLED"
    assert (logs / "ENDED").exists()


def _wait_for(cond: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.5)
    raise AssertionError(f"condition not met in {timeout}s")


@pytest.mark.slow
def test_two_node_job_runs_head_and_worker_on_different_nodes(
    slurm_cluster_2nodes: SlurmCluster, ray_env: dict[str, str], tmp_path: Path
) -> None:
    job = submit_ray(slurm_cluster_2nodes, tmp_path, *HELLO, sbatch=("-N", "2"))
    assert slurm_cluster_2nodes.wait_final(job, timeout=240) == "COMPLETED", (
        tmp_path / f"{job}.out"
    ).read_text()
    logs = tmp_path / f"{job}-logs"
    assert (logs / "ray-worker-1.log").exists()
    driver = (logs / "ray-driver.log").read_text()
    assert "ray nodes alive: 2" in driver
    assert len({x for x in driver.split() if "@" in x}) == 2  # one task ran on each node's address


def test_usr1_reaches_the_driver_and_its_exit_code_is_the_jobs(
    slurm_cluster: SlurmCluster, ray_env: dict[str, str], tmp_path: Path
) -> None:
    driver = 'trap "echo got-usr1; exit 5" USR1; echo trap-set; while :; do sleep 0.2; done'
    job = submit_ray(slurm_cluster, tmp_path, "bash", "-c", driver)
    logs = tmp_path / f"{job}-logs"
    _wait_for(lambda: (logs / "STARTED_RAY_HEAD").exists(), 120)
    driver_log = logs / "ray-driver.log"
    _wait_for(lambda: driver_log.exists() and "trap-set" in driver_log.read_text(), 30)
    slurm_cluster.run("scancel", "--signal=USR1", "--batch", job)
    assert slurm_cluster.wait_final(job, timeout=60) == "FAILED"
    assert slurm_cluster.exit_code(job) == "5:0"
    assert "got-usr1" in driver_log.read_text()


@pytest.fixture
def ray_daemon(tmp_path: Path, ray_env: dict[str, str]) -> Iterator[DaemonProcess]:
    d = DaemonProcess(tmp_path / "root", env=ray_env)  # our launcher: Ray, as a spec gets it
    yield d
    d.stop()


def test_hello_ray_spec_runs_as_a_ray_job_and_is_tracked_to_completion(ray_daemon: DaemonProcess) -> None:
    daemon = ray_daemon
    daemon.start()
    run = daemon.submit(REPO / "examples" / "hello-ray.yaml")
    final = daemon.wait_state(run, {"COMPLETED", "FAILED"}, timeout=180)
    detail = daemon.status(run)
    assert final["state"] == "COMPLETED", detail
    kinds = [e["kind"] for e in detail["events"]]
    assert kinds.index("submitted") < kinds.index("running") < kinds.index("ended")
    job = detail["slurm_job_id"]
    logs = daemon.root / "runs" / run / "logs" / f"{job}-logs"
    assert (logs / "STARTED_RAY_HEAD").exists()
    assert (logs / "ray-head.log").stat().st_size > 0
    assert "HELLO-RAY-OK" in (logs / "ray-driver.log").read_text()
