"""`shepherd doctor` on the real dev cluster: what works is OK, and real breakage shows as FAIL with a fix."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support.daemon import REPO, SHEPHERD
from tests.support.standin_thread import StandinThread

pytestmark = pytest.mark.slurm


def doctor(root: Path, env: dict[str, str], *extra: str) -> tuple[int, dict[str, dict[str, str]]]:
    res = subprocess.run(
        [*SHEPHERD, "--root", str(root), "doctor", "--json", *extra],
        env=env,
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    return res.returncode, {f["check"]: f for f in json.loads(res.stdout)}


def test_doctor_on_the_dev_cluster(tmp_path: Path, slurm_cluster: Any) -> None:
    root = tmp_path / "root"
    root.mkdir(mode=0o700)
    _, found = doctor(root, slurm_cluster.env)
    for check in ("slurm commands", "controller", "munge", "permissions", "disk space", "clock skew"):
        assert found[check]["status"] == "ok", found[check]
    assert "22.05" in found["slurm commands"]["detail"]
    assert found["accounting (sacct)"]["status"] in ("ok", "warn")  # warn: no slurmdbd, jobcomp only
    assert found["filesystem: state"]["status"] == "warn"  # /tmp is local: no takeover from elsewhere
    assert found["slack"]["status"] == "skip"


def test_doctor_reports_each_real_breakage(tmp_path: Path, slurm_cluster: Any) -> None:
    root = tmp_path / "root"
    root.mkdir(mode=0o777)
    root.chmod(0o777)
    no_slurm = {**slurm_cluster.env, "PATH": "/nonexistent"}
    code, found = doctor(root, no_slurm)
    assert code == 1 and found["slurm commands"]["status"] == "fail"
    assert found["permissions"]["status"] == "fail"  # a world-writable root
    elsewhere = {**slurm_cluster.env, "SLURM_CONF": str(tmp_path / "no-such-cluster.conf")}
    assert doctor(root, elsewhere)[1]["controller"]["status"] == "fail"
    _, found = doctor(root, slurm_cluster.env, "--min-free-gb", "100000000")
    assert found["disk space"]["status"] == "fail"
    slack = StandinThread().start()
    try:
        bad_token = {
            **slurm_cluster.env,
            "SHEPHERD_SLACK__MODE": "socket",
            "SHEPHERD_SLACK__BASE_URL": slack.standin.api_url,
            "SLACK_BOT_TOKEN": "x",  # the stand-in refuses a token this short (not_authed)
        }
        result = doctor(root, bad_token)[1]["slack"]
    finally:
        slack.stop()
    assert result["status"] == "fail" and "auth.test" in result["detail"], result
