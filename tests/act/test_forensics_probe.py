"""The probe that runs on a hung job's node finds the job's Python processes (by SLURM_JOB_ID, nobody
else's) and takes each one's stacks: py-spy where ptrace is allowed, else the trainer's faulthandler dump on
SIGUSR2; a process that does not catch SIGUSR2 is never signalled. Real processes, no Slurm."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from supervisor.act import forensics_probe
from supervisor.decide.stacks import from_faulthandler, from_pyspy

REPO = Path(__file__).resolve().parents[2]
HUNG = """
import sys, time
sys.path.insert(0, {repo!r})
if {dump}:
    from trainer.stacks import enable_stack_dump
    enable_stack_dump()
def hang_forever():  # as trainer/faults.py's (which needs the venv's packages)
    while True:
        time.sleep(3600)
print("ready", flush=True)
hang_forever()
"""


Spawn = Callable[[str, str, bool], int]  # (python, SLURM_JOB_ID, registers the dump) -> pid


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[Spawn]:
    procs: list[subprocess.Popen[bytes]] = []

    def start(python: str, job: str, dump: bool) -> int:
        env = {**os.environ, "SLURM_JOB_ID": job, "SHEPHERD_STACKS_DIR": str(tmp_path / "stacks")}
        p = subprocess.Popen(
            [python, "-c", HUNG.format(repo=str(REPO), dump=dump)], env=env, stdout=subprocess.PIPE
        )
        procs.append(p)
        assert p.stdout is not None and p.stdout.readline() == b"ready\n"
        return p.pid

    yield start
    for p in procs:
        p.kill()
        p.wait()


def probe(job: str, path: str) -> dict[str, object]:
    env = {**os.environ, "PATH": path}
    out = subprocess.run(
        [sys.executable, forensics_probe.__file__, job, "10"], env=env, capture_output=True, check=True
    )
    data = json.loads(out.stdout)
    assert isinstance(data, dict)
    return data


def by_pid(data: dict[str, object]) -> dict[int, dict[str, object]]:
    procs = data["processes"]
    assert isinstance(procs, list)
    return {int(p["pid"]): p for p in procs}


def test_py_spy_beside_the_jobs_python_dumps_the_hanging_function(spawn: Spawn, tmp_path: Path) -> None:
    spy = REPO / ".venv" / "bin" / "py-spy"
    if not spy.exists():
        pytest.skip("py-spy is not installed in .venv (scripts/setup installs the trainer extra)")
    # The job's bin/ holds its Python and py-spy, and no `ray`: the venv's would make the probe ask a Ray
    # that is not there (`ray status` waits for a GCS until the probe's 10-s bound, twice).
    job_bin = tmp_path / "job" / "bin"
    job_bin.mkdir(parents=True)
    (job_bin / "python").symlink_to(sys.executable)
    (job_bin / "py-spy").symlink_to(spy)
    pid = spawn(str(job_bin / "python"), "4242001", False)
    other = spawn(str(job_bin / "python"), "4242999", False)  # another job's process
    found = by_pid(probe("4242001", "/usr/bin:/bin"))
    assert other not in found
    p = found[pid]
    assert p["method"] == "py-spy", p
    (_, frames), *_ = from_pyspy(p["threads"])
    assert frames[0].func == "hang_forever"


def test_without_py_spy_the_trainers_faulthandler_dump_is_used_and_others_are_left_alone(
    spawn: Spawn, tmp_path: Path
) -> None:
    system = shutil.which("python3", path="/usr/bin:/bin")
    if system is None:
        pytest.skip("no system python3 outside the venv")
    dumping = spawn(system, "4242002", True)
    silent = spawn(system, "4242002", False)  # no faulthandler: never signalled
    found = by_pid(probe("4242002", "/usr/bin:/bin"))
    d = found[dumping]
    assert d["method"] == "faulthandler" and "py-spy not installed" in str(d["why"])
    (name, frames), *_ = from_faulthandler(str(d["text"]))
    assert name == "current" and frames[0].func == "hang_forever"
    s = found[silent]
    assert s["method"] == "none" and "does not catch SIGUSR2" in str(s["error"])
    time.sleep(0.5)
    os.kill(silent, 0)  # still alive: the default action of SIGUSR2 would have killed it


def test_rays_own_processes_are_left_out_and_the_runs_are_kept() -> None:
    daemon = forensics_probe.ray_daemon
    assert daemon(["ray::DashboardAgent"]) and daemon(["ray::RuntimeEnvAgent"])
    assert daemon(["/venv/bin/python", "-m", "ray.util.client.server", "--port", "10001"])
    assert daemon(["/venv/bin/python", "/venv/lib/ray/_private/log_monitor.py"])
    assert not daemon(["ray::RolloutWorker.generate"]) and not daemon(["ray::IDLE"])
    assert not daemon(["/venv/bin/python", "-m", "trainer", "--config", "x.yaml"])


def test_ray_is_asked_at_the_jobs_own_address_with_its_token_not_whichever_ray_last_started_here() -> None:
    driver = (
        11,
        ["python", "-m", "trainer"],
        {
            "SLURM_JOB_ID": "7",
            "RAY_ADDRESS": "10.0.0.5:6379",
            "RAY_AUTH_MODE": "token",
            "RAY_AUTH_TOKEN": "t0k",
            "HOME": "/home/u",
        },
    )
    worker = (12, ["ray::RolloutWorker"], {"SLURM_JOB_ID": "7"})
    assert forensics_probe.ray_client_env([worker, driver]) == {
        "RAY_ADDRESS": "10.0.0.5:6379",
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN": "t0k",
    }
    assert forensics_probe.ray_client_env([worker]) == {}
    client = (13, ["python"], {"RAY_ADDRESS": "ray://head:10001"})  # a Ray client's, not a GCS
    assert forensics_probe.ray_client_env([client, (14, ["python"], {"RAY_ADDRESS": "auto"})]) == {}
