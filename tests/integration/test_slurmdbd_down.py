"""slurmdbd stopped while a job runs (issue #6): the daemon keeps running, says accounting is unavailable,
marks nothing failed, settles the end from squeue, and records the exit code once slurmdbd is back.

It runs on a PRIVATE `--with-dbd` cluster (own folder, ports, DB and job ids) so the shared dev cluster, which
runs without slurmdbd, keeps its mode and its jobs. docs/reliability.md points here.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import workers
from tests.support.daemon import REPO, DaemonProcess, wait_for

from .conftest import SLURM_VERSION, cluster_env

pytestmark = pytest.mark.slurm

DEV_CLUSTER = REPO / "scripts" / "dev-cluster"
PLAIN = REPO / "tests" / "support" / "plain.sub"
FINAL = {"COMPLETED", "FAILED", "GAVE_UP", "CANCELLED", "LOST"}
# The session cluster's ports + 100 (22.05 on gw0: 6917 slurmctld, 6918 slurmd, 6919 slurmdbd), MariaDB's + 10
# (3317); job ids from 70000 (cgroup paths
# slurm_node1/uid_0/job_<id> are shared by every slurmd on the kernel); its own netns id, so `down` never
# touches another cluster's veth.
PRIVATE_DBD_ENV = {
    k: v
    for k, v in workers.private_cluster_env(
        SLURM_VERSION,
        "dbd",
        port_offset=100,
        db_port_offset=10,
        first_job_id=70000,
        net_id=workers.base(SLURM_VERSION)["net_id"] + 3,
    ).items()
    if k != "SHEPHERD_DEV_CLUSTER_DIR"  # a short mkdtemp folder instead: the munge socket path has a limit
}


class DbdCluster:
    def __init__(self, env: dict[str, str]) -> None:
        self.env = env

    def dev_cluster(self, *argv: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [str(DEV_CLUSTER), *argv], env=self.env, capture_output=True, text=True, timeout=timeout
        )
        if proc.returncode != 0:
            raise AssertionError(f"dev-cluster {' '.join(argv)} failed:\n{proc.stderr[-3000:]}")
        return proc

    def sacct_works(self) -> bool:
        proc = subprocess.run(
            ["sacct", "-n", "-X", "-o", "JobID"], env=self.env, capture_output=True, text=True, timeout=60
        )
        return proc.returncode == 0


@pytest.fixture(scope="module")
def dbd_cluster() -> Iterator[DbdCluster]:
    if os.geteuid() != 0:
        pytest.skip("the dev Slurm cluster needs root")
    if shutil.which("apt-get") is None and shutil.which("slurmdbd") is None:
        pytest.skip("no slurmdbd and no apt-get to install it")
    folder = tempfile.mkdtemp(prefix="shepherd-dbd-cluster-")  # short: the munge socket path has a limit
    env = {**os.environ, **PRIVATE_DBD_ENV, "SHEPHERD_DEV_CLUSTER_DIR": folder}
    env.pop("SLURM_CONF", None)
    cluster = DbdCluster(env)
    try:
        up = cluster.dev_cluster("up", "--with-dbd", timeout=600)
        # Its SLURM_CONF, and for a version in its own root its client wrappers (not the shared cluster's).
        env.update(cluster_env(up.stdout, env))
        yield cluster
    finally:
        subprocess.run(
            [str(DEV_CLUSTER), "down", "--wipe"], env=env, capture_output=True, text=True, timeout=180
        )
        shutil.rmtree(folder, ignore_errors=True)


def spec(tmp: Path, name: str, seconds: int) -> Path:
    path = tmp / f"{name}.yaml"
    path.write_text(
        "\n".join(
            [
                f"name: {name}",
                f'command: ["sleep", "{seconds}"]',
                f"workdir: {tmp}",
                "slurm: {cpus: 1, time: '00:10:00'}",
            ]
        )
        + "\n"
    )
    return path


def test_slurmdbd_down_marks_nothing_failed_and_the_exit_code_comes_later(
    dbd_cluster: DbdCluster, tmp_path: Path
) -> None:
    started = time.monotonic()
    d = DaemonProcess(tmp_path / "root", env={**dbd_cluster.env, "SHEPHERD_LAUNCH_SCRIPT": str(PLAIN)})
    d.start()
    try:
        run = d.submit(spec(tmp_path, "acct-down", 10))
        job = d.wait_state(run, "RUNNING", timeout=60)["slurm_job_id"]
        assert int(job) >= 70000
        dbd_cluster.dev_cluster("dbd-stop")  # MariaDB keeps running; the private cluster is wiped at the end
        assert not dbd_cluster.sacct_works()

        # The job ends while slurmdbd is down: squeue says COMPLETED (the rules complete the run on it), sacct
        # fails. The daemon waits 30 s for the exit code, then settles the attempt on squeue's word.
        final = d.wait_state(run, FINAL, timeout=60)
        assert final["state"] == "COMPLETED" and final["attempts"] == 1, d.status(run)

        def ended() -> list[str]:
            return [e["message"] for e in d.status(run)["events"] if e["kind"] == "ended"]

        [message] = wait_for(ended, 60, 1.0, "the attempt settled without sacct")
        assert "Slurm accounting (sacct) unavailable" in message, message
        detail = d.status(run)
        assert detail["state"] == "COMPLETED" and detail["exit_code"] is None and detail["attempts"] == 1
        kinds = [e["kind"] for e in detail["events"]]
        assert not {"failed", "lost", "resume-scheduled"} & set(kinds), kinds
        assert "sacct) unavailable" in d.cli("status", run).stdout
        log = d.log_text()
        assert log.count("slurm accounting (sacct) unavailable") == 1, "warned once per outage"
        assert "sacct exited" in log  # the warning carries sacct's own error
        assert d.proc is not None and d.proc.poll() is None, "the daemon died while slurmdbd was down"

        dbd_cluster.dev_cluster("dbd-start")
        # slurmctld sends the queued job records to slurmdbd once it reconnects; the daemon asks again.
        recorded = wait_for(
            lambda: (s := d.status(run))["exit_code"] is not None and s, 60, 1.0, "the late exit code"
        )
        assert recorded["exit_code"] == 0 and recorded["state"] == "COMPLETED" and recorded["attempts"] == 1
        [late] = [e for e in d.status(run)["events"] if e["kind"] == "exit-code"]
        assert "exit code recorded: exit 0" in late["message"] and "COMPLETED" in late["message"]
        assert "slurm accounting (sacct) answers again" in d.log_text()
        assert d.proc is not None and d.proc.poll() is None
    finally:
        d.stop()
    print(f"slurmdbd-down test: {time.monotonic() - started:.1f} s after the cluster was up")


def test_dbd_stop_on_a_cluster_without_slurmdbd_says_so() -> None:
    if os.geteuid() != 0:
        pytest.skip("scripts/dev-cluster needs root")
    folder = tempfile.mkdtemp(prefix="shepherd-nodbd-")  # no cluster there at all, so no --with-dbd mode
    try:
        env = {**os.environ, **PRIVATE_DBD_ENV, "SHEPHERD_DEV_CLUSTER_DIR": folder}
        proc = subprocess.run(
            [str(DEV_CLUSTER), "dbd-stop"], env=env, capture_output=True, text=True, timeout=60
        )
        assert proc.returncode != 0 and "--with-dbd" in proc.stderr
    finally:
        shutil.rmtree(folder, ignore_errors=True)
