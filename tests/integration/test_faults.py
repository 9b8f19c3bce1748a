"""Faults around the daemon, each injected for real: an unsafe queue folder, the store locked by another
process, a log file deleted under the tailer, a checkpoint dir removed before a resume.

docs/reliability.md and docs/security.md point here.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from supervisor.intake.queue import queue_dir_problem
from tests.support.daemon import REPO, DaemonProcess, wait_for
from tests.support.specs import fake_argv, records, write_spec

PLAIN = REPO / "tests" / "support" / "plain.sub"
FINAL = {"COMPLETED", "FAILED", "GAVE_UP", "CANCELLED", "LOST"}


# ---- the queue folder: only the daemon's user may write it ----------------------------------------------
@pytest.mark.parametrize(("mode", "who"), [(0o770, "group"), (0o777, "group and others"), (0o703, "others")])
def test_a_queue_folder_others_can_write_is_reported(tmp_path: Path, mode: int, who: str) -> None:
    q = tmp_path / "queue"
    q.mkdir()
    q.chmod(mode)
    problem = queue_dir_problem(q)
    assert problem is not None and f"writable by {who}" in problem and "chmod go-w" in problem


def test_a_private_queue_folder_is_fine_and_a_foreign_one_is_not(tmp_path: Path) -> None:
    q = tmp_path / "queue"
    q.mkdir(mode=0o700)
    q.chmod(0o755)
    assert queue_dir_problem(q) is None
    if os.geteuid() != 0:
        pytest.skip("needs root to give the folder to another uid")
    os.chown(q, 65534, -1)
    problem = queue_dir_problem(q)
    assert problem is not None and "owned by uid 65534" in problem


def test_the_daemon_refuses_to_start_on_a_world_writable_queue(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "queue").mkdir(parents=True)
    (root / "queue").chmod(0o777)
    d = DaemonProcess(root)
    d.start()
    try:
        assert d.wait_exit(60) != 0
    finally:
        d.stop()
    log = d.log_text()
    assert "refusing to start" in log and "writable by group and others" in log and "chmod go-w" in log


# ---- on the dev cluster ---------------------------------------------------------------------------------
@pytest.fixture
def sup(tmp_path: Path, slurm_cluster: Any) -> Iterator[DaemonProcess]:
    d = DaemonProcess(tmp_path / "root", env={**slurm_cluster.env, "SHEPHERD_LAUNCH_SCRIPT": str(PLAIN)})
    d.start()
    yield d
    d.stop()


def fake_spec(tmp: Path, name: str, kind: str, *extra: str) -> Path:
    return write_spec(tmp, name, fake_argv(tmp, name, kind, *extra))


@pytest.mark.slurm
def test_the_store_locked_by_another_process_delays_the_daemon_but_loses_nothing(
    sup: DaemonProcess, tmp_path: Path, slurm_cluster: Any
) -> None:
    """Another process holds the SQLite write lock for a few seconds (under the 10 s busy timeout)."""
    run = sup.submit(fake_spec(tmp_path, "locked", "harmless", "--sleep", "6"))
    # Its job id as soon as it is submitted (a short job may end between two polls: never seen RUNNING).
    job = str(wait_for(lambda: sup.status(run).get("slurm_job_id"), 60, 0.3, "the job submitted"))
    db = sup.root / "state" / "shepherd.sqlite3"
    held = threading.Event()

    def hold_lock() -> None:
        con = sqlite3.connect(str(db), isolation_level=None, timeout=10)
        con.execute("BEGIN IMMEDIATE")
        held.set()
        # The job ends meanwhile: the daemon's writes about it wait for the lock (held < the 10 s timeout).
        ended = time.monotonic() + 8
        while time.monotonic() < ended and slurm_cluster.job_state(job)[0] in ("", "PENDING", "RUNNING"):
            time.sleep(0.2)
        con.execute("ROLLBACK")
        con.close()

    t = threading.Thread(target=hold_lock)
    t.start()
    held.wait(10)
    second = sup.submit(fake_spec(tmp_path, "while-locked", "harmless"))  # the queue needs no lock
    t.join()
    assert sup.wait_state(run, FINAL, timeout=90)["state"] == "COMPLETED"
    assert sup.wait_state(second, FINAL, timeout=90)["state"] == "COMPLETED"
    assert sup.proc is not None and sup.proc.poll() is None, "the daemon died while the store was locked"


@pytest.mark.slurm
def test_a_log_file_deleted_under_the_tailer_breaks_nothing(sup: DaemonProcess, tmp_path: Path) -> None:
    # Long enough to be seen RUNNING by a poll on a loaded machine (it is deleted under the running job).
    run = sup.submit(fake_spec(tmp_path, "deleted-log", "harmless", "--sleep", "15"))
    job = sup.wait_state(run, "RUNNING", timeout=60)["slurm_job_id"]
    driver = sup.root / "runs" / run / "logs" / f"{job}-logs" / "ray-driver.log"
    wait_for(driver.exists, 30, what=str(driver))
    driver.unlink()  # the job keeps writing to the unlinked file; the tailer loses sight of it
    final = sup.wait_state(run, FINAL, timeout=90)
    assert final["state"] == "COMPLETED" and final["attempts"] == 1
    assert sup.proc is not None and sup.proc.poll() is None
    assert "monitor tick failed" not in sup.log_text()


@pytest.mark.slurm
def test_a_checkpoint_dir_removed_before_the_resume_falls_back_with_a_clear_reason(
    sup: DaemonProcess, tmp_path: Path
) -> None:
    # The job fails 10 s after its checkpoint: time to remove it under load (no status round trips first).
    run = sup.submit(fake_spec(tmp_path, "no-ckpt", "cuda-oom", "--sleep", "10"))
    ck = tmp_path / "no-ckpt" / "ckpt"
    wait_for(lambda: (ck / "step_10").exists(), 90, 0.05, what="the first checkpoint")
    for p in sorted(ck.rglob("*"), reverse=True):
        p.unlink() if p.is_file() else p.rmdir()
    ck.rmdir()
    final = sup.wait_state(run, FINAL, timeout=120)
    assert final["state"] == "COMPLETED" and final["attempts"] == 2, sup.status(run)
    [d] = [d for d in sup.status(run)["decisions"] if d["rule"] == "cuda-oom"]
    assert "resuming without a checkpoint" in d["outcome"] and "is missing (removed?)" in d["outcome"]
    _first, second = records(tmp_path, "no-ckpt")
    assert "--resume-from" not in second["argv"]
