"""`shepherd service install --slurm` on the dev cluster: the daemon runs as a one-CPU job, stops cleanly
(SIGTERM, lease released) before its time limit, and its queued successor takes over; no two are active."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from supervisor.lease.keeper import read_lease
from supervisor.service.slurm_host import job_name
from tests.support.daemon import REPO, SHEPHERD, wait_for

pytestmark = pytest.mark.slurm
# A 1-minute limit, SIGTERM up to 25 s before it, the successor eligible 5 s after the first started.
INSTALL = ["--time", "1", "--stop-grace", "25", "--restart-delay", "5", "--partition", "debug"]


def jobs(env: dict[str, str], name: str) -> list[tuple[str, str]]:
    out = subprocess.run(
        ["squeue", "-h", "-t", "all", "-n", name, "-o", "%i|%T"], env=env, capture_output=True, text=True
    ).stdout
    return [tuple(line.split("|")) for line in out.split()]  # type: ignore[misc]


def test_the_daemon_runs_as_a_slurm_job_stops_at_its_limit_and_its_successor_takes_over(
    tmp_path: Path, slurm_cluster: Any
) -> None:
    root = (tmp_path / "root").resolve()
    env = {
        **slurm_cluster.env,
        "SHEPHERD_LEASE__TTL_S": "20",
        "SHEPHERD_LEASE__RENEW_EVERY_S": "2",
        "SHEPHERD_SLURM__COMMAND_TIMEOUT_S": "10",
        # In the installing shell, never in the daemon's job (slurmctld keeps a job's environment).
        "SLACK_BOT_TOKEN": "xoxb-1111-2222-hostedtoken",
        "SBATCH_PARTITION": "no-such-partition",
    }
    name = job_name(root)
    try:
        res = subprocess.run(
            [
                *SHEPHERD,
                "--root",
                str(root),
                "service",
                "install",
                "--slurm",
                "--time",
                "1",
                "--stop-grace",
                "25",
                "--restart-delay",
                "5",
                "--partition",
                "debug",
            ],
            env=env,
            capture_output=True,
            text=True,
            cwd=REPO,
            timeout=60,
        )
        assert res.returncode == 0, res.stderr
        first = res.stdout.split("as job ")[1].split()[0]
        lease_dir = root / "state" / "lease"
        rec = wait_for(lambda: read_lease(lease_dir), 90, 0.5, "the hosted daemon to take the lease")
        assert rec.generation == 1
        # The daemon's own environment (it runs on this machine): its settings, no token.
        environ = dict(
            e.split("=", 1) for e in Path(f"/proc/{rec.pid}/environ").read_text().split("\0") if "=" in e
        )
        assert environ["SHEPHERD_LEASE__TTL_S"] == "20" and environ["SLURM_CONF"] == env["SLURM_CONF"]
        assert "SLACK_BOT_TOKEN" not in environ and "SBATCH_PARTITION" not in environ
        assert not any("hostedtoken" in v for v in environ.values())
        assert "hostedtoken" not in (root / "service" / "shepherd-daemon.sbatch").read_text()
        assert any(state == "PENDING" for _, state in jobs(env, name)), "no successor queued"
        # The time limit (1 min): SIGTERM comes up to stop-grace s before it; the daemon stops and releases.
        wait_for(
            lambda: dict(jobs(env, name)).get(first) == "COMPLETED", 150, 1.0, "the first job to end cleanly"
        )
        log = (root / "service" / f"daemon-{first}.log").read_text()
        assert '"signal": "SIGTERM"' in log and "lease released" in log, log[-2000:]
        rec2 = wait_for(
            lambda: (r := read_lease(lease_dir)) is not None and r.generation == 2 and not r.released and r,
            120,
            0.5,
            "the successor to take the lease",
        )
        running = [j for j, s in jobs(env, name) if s == "RUNNING"]
        assert len(running) == 1 and running[0] != first, jobs(env, name)
        assert rec2.pid != rec.pid
    finally:
        subprocess.run(["scancel", f"--name={name}"], env=env, capture_output=True)
