"""The launcher's file layout: log folders after requeues, the ENDED check, the driver-exit line."""

from __future__ import annotations

import time
from pathlib import Path

from supervisor.slurm.launchers.layout import (
    current_log_dir,
    driver_exit_time,
    ended_overdue,
    log_files,
    newest_log_dir,
    output_file,
)


def test_the_newest_requeue_folder_is_chosen_by_its_restart_count() -> None:
    names = ["77-logs", "77-1-logs", "77-2-logs", "77-10-logs", "777-logs", "77-logs.bak"]
    assert newest_log_dir(names, "77") == "77-10-logs"
    assert newest_log_dir(["77-logs"], "77") == "77-logs"
    assert newest_log_dir(["777-3-logs"], "77") is None


def test_ended_is_overdue_only_after_ray_started_and_the_driver_exited_long_enough_ago() -> None:
    started = ["STARTED_RAY_HEAD", "ray-driver.log"]
    assert ended_overdue(started, driver_exited_at=100.0, now=800.0, after_s=600) is True
    assert ended_overdue(started, driver_exited_at=100.0, now=500.0, after_s=600) is False
    assert ended_overdue([*started, "ENDED"], driver_exited_at=100.0, now=800.0, after_s=600) is False
    assert ended_overdue(started, driver_exited_at=None, now=800.0, after_s=600) is False
    assert ended_overdue(["ray-driver.log"], driver_exited_at=100.0, now=800.0, after_s=600) is False


def test_a_restarted_daemon_recovers_when_the_driver_exited_from_the_launchers_own_line() -> None:
    tail = (
        "[ray.sub 2026-11-21 03:10:00] ray head up\n[ray.sub 2026-11-21 03:12:44] driver exited with code 1\n"
    )
    stamped = time.mktime(time.strptime("2026-11-21 03:12:44", "%Y-%m-%d %H:%M:%S"))
    assert driver_exit_time(tail, mtime=stamped + 600) == stamped  # the line's own time, not the last write
    assert driver_exit_time("driver exited with code 0\n", mtime=123.0) == 123.0  # no stamp: the file's mtime
    assert driver_exit_time("[ray.sub 2026-11-21 03:10:00] ray head up\n", mtime=123.0) is None


def test_log_files_are_the_output_then_every_log_folder_of_that_job_only(tmp_path: Path) -> None:
    for d in ("77-logs", "77-1-logs", "777-logs"):
        (tmp_path / d).mkdir()
        (tmp_path / d / "ray-driver.log").write_text("x")
    (tmp_path / "77-logs" / "ray-head.log").write_text("x")
    names = [str(p.relative_to(tmp_path)) for p in log_files(tmp_path, "77")]
    assert names == [
        "slurm-77.out",
        "77-1-logs/ray-driver.log",
        "77-logs/ray-driver.log",
        "77-logs/ray-head.log",
    ]
    assert output_file(tmp_path, "77") == tmp_path / "slurm-77.out"
    assert current_log_dir(tmp_path, "77") == tmp_path / "77-1-logs"
    assert current_log_dir(tmp_path, "78") is None
