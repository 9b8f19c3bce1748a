"""The daemon's end-to-end core on the other Slurm version: the session runs one (22.05 unless
SHEPHERD_DEV_SLURM says otherwise), and this runs the core again, in a pytest of its own, against a cluster of
the other (24.11 beside 22.05), so CI keeps both working through the same tests.

The other version's cluster: the script's defaults for that version (its own folder, ports, job ids); a
session on private ports gets one beside them (port +10, job ids +5000, netns id +1, folder
`<dir>-<version>`), and SHEPHERD_OTHER_SLURM_ENV ("KEY=VALUE ...") sets any of those explicitly. A cluster
this test started is wiped at the end; the 24.11 root it needs is built once per machine and cached
(scripts/setup builds it).
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys

import pytest

from .conftest import DEV_CLUSTER, REPO, SLURM_VERSION, SlurmCluster

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

VERSIONS = ("22.05", "24.11")
# A job that completes (the crash and the outage runs end COMPLETED), one that fails, a cancel, hold/release,
# an OOM, a controller outage, a crash between sbatch and commit, and a real time limit continuing the chain.
CORE = [
    *(
        f"tests/integration/test_daemon.py::{name}"
        for name in (
            "test_a_failing_job_ends_failed_with_its_exit_code",
            "test_a_pending_reason_is_reported_while_pending_and_cancel_works",
            "test_hold_and_release_reach_the_pending_job_and_the_run",
            "test_a_job_over_its_memory_ends_out_of_memory_and_host_oom_decides",
            "test_sigkill_between_sbatch_and_commit_leaves_exactly_one_job",
            "test_slurmctld_outage_marks_nothing_failed_and_tracking_resumes",
        )
    ),
    "tests/integration/test_rules_resume.py::test_a_real_time_limit_resumes_the_chain",
]
CLUSTER_KEYS = (
    "SHEPHERD_DEV_CLUSTER_DIR",
    "SHEPHERD_DEV_PORT",
    "SHEPHERD_DEV_FIRST_JOB_ID",
    "SHEPHERD_DEV_NET_ID",
)


def other_cluster_env(version: str) -> dict[str, str]:
    """The environment of a pytest session against `version`'s cluster, without this session's cluster."""
    # Not an xdist worker either: this worker's cluster values, shifted below, are the nested session's own.
    env = {k: v for k, v in os.environ.items() if k not in CLUSTER_KEYS and not k.startswith("PYTEST_XDIST")}
    for key in ("SLURM_CONF", "SHEPHERD_SLURM__BIN_DIR", "SHEPHERD_DEV_CLUSTER_ARGS"):
        env.pop(key, None)
    wrappers = os.environ.get("SHEPHERD_SLURM__BIN_DIR")
    env["PATH"] = ":".join(p for p in os.environ.get("PATH", "").split(":") if p and p != wrappers)
    env["SHEPHERD_DEV_SLURM"] = version
    env["SHEPHERD_REQUIRE_SLURM"] = "1"  # its cluster must come up: a skip there is a failure here
    if os.environ.get("SHEPHERD_DEV_PORT"):
        env["SHEPHERD_DEV_PORT"] = str(int(os.environ["SHEPHERD_DEV_PORT"]) + 10)
        env["SHEPHERD_DEV_FIRST_JOB_ID"] = str(int(os.environ.get("SHEPHERD_DEV_FIRST_JOB_ID") or 1) + 5000)
        env["SHEPHERD_DEV_NET_ID"] = str(int(os.environ.get("SHEPHERD_DEV_NET_ID") or 0) + 1)
        if os.environ.get("SHEPHERD_DEV_CLUSTER_DIR"):
            env["SHEPHERD_DEV_CLUSTER_DIR"] = f"{os.environ['SHEPHERD_DEV_CLUSTER_DIR']}-{version}"
    for item in shlex.split(os.environ.get("SHEPHERD_OTHER_SLURM_ENV", "")):
        key, _, value = item.partition("=")
        if key not in CLUSTER_KEYS:
            raise ValueError(f"SHEPHERD_OTHER_SLURM_ENV: {key!r} is not one of {', '.join(CLUSTER_KEYS)}")
        env[key] = value
    return env


@pytest.mark.timeout(1800)  # ~5 min here; the suite's 600 s per test would cut a slow machine's run short
@pytest.mark.parametrize("version", [v for v in VERSIONS if v != SLURM_VERSION])
def test_the_daemon_core_passes_on_the_other_slurm_version(slurm_cluster: SlurmCluster, version: str) -> None:
    env = other_cluster_env(version)
    was_up = (
        subprocess.run([str(DEV_CLUSTER), "status"], env=env, capture_output=True, timeout=120).returncode
        == 0
    )
    try:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                "-p",
                "no:randomly",
                "-rfEs",
                *CORE,
            ],
            env=env,
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=1500,
        )
    finally:
        if not was_up:
            subprocess.run([str(DEV_CLUSTER), "down", "--wipe"], env=env, capture_output=True, timeout=300)
    report = proc.stdout[-8000:] + proc.stderr[-2000:]
    assert proc.returncode == 0, report
    assert f"{len(CORE)} passed" in proc.stdout, report
