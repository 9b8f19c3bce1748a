"""The log filesystem fills up under a running job: the daemon keeps supervising and recovers after."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.daemon import REPO, DaemonProcess

pytestmark = pytest.mark.slurm
PLAIN = REPO / "tests" / "support" / "plain.sub"
WRITER = "import sys\nfor i in range(20000): print('x' * 100, i)\n"


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a small tmpfs needs root")
    mnt = tmp_path / "logs"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mnt)], check=True)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_a_full_log_filesystem_fails_the_job_not_the_daemon_and_a_resume_recovers(
    tmp_path: Path, small_fs: Path, slurm_cluster: Any
) -> None:
    spec = tmp_path / "chatty.yaml"
    spec.write_text(
        f"name: chatty\ncommand: ['python', '-c', {WRITER!r}]\nworkdir: {tmp_path}\n"
        f"log_dir: {small_fs}\nslurm: {{cpus: 1}}\n"
    )
    d = DaemonProcess(tmp_path / "root", env={**slurm_cluster.env, "SHEPHERD_LAUNCH_SCRIPT": str(PLAIN)})
    d.start()
    try:
        run = d.submit(spec)
        failed = d.wait_state(run, {"FAILED", "COMPLETED", "GAVE_UP"}, timeout=120)
        # The job could not write its log: it failed, or `disk-full` read tee's "No space left on device" (in
        # the Slurm output) first and gave the run up for a person to free space and resume (issue 29).
        assert failed["state"] in ("FAILED", "GAVE_UP"), failed
        rules = {x["rule"] for x in d.status(run)["decisions"]}
        assert failed["state"] == "FAILED" or "disk-full" in rules, (failed, rules)
        assert d.proc is not None and d.proc.poll() is None  # the daemon is still running
        assert d.status()  # and answering

        subprocess.run(["mount", "-o", "remount,size=16m", str(small_fs)], check=True)  # the fault ends
        d.cli("resume", run)
        done = d.wait_state(run, {"COMPLETED", "FAILED", "GAVE_UP"}, timeout=120)
        assert done["state"] == "COMPLETED" and done["attempts"] == 2
    finally:
        d.stop()
