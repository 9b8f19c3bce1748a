"""Restart in place is the default: every submission runs the driver under the job-side runner, copied into
the job's log folder (where the job surely reaches), unless the spec says `resume.in_place: false`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio

from supervisor.daemon.compose import build
from supervisor.domain.runs import RunRow
from supervisor.settings import Settings
from supervisor.slurm.client import SlurmClient, SubmitRequest
from supervisor.slurm.launchers import runner
from supervisor.store import Store


class RecordingSlurm(SlurmClient):
    def __init__(self) -> None:
        super().__init__(user="root")
        self.requests: list[SubmitRequest] = []

    async def submit(self, req: SubmitRequest) -> str:
        self.requests.append(req)
        return str(100 + len(self.requests))


def submit(tmp_path: Path, spec: dict[str, Any]) -> tuple[SubmitRequest, Store, RunRow]:
    settings = Settings(root=tmp_path / "root")
    store = Store(tmp_path / "s.sqlite3")
    slurm = RecordingSlurm()
    daemon = build(settings, store=store, slurm=slurm).daemon
    (settings.runs_dir / "r1").mkdir(parents=True)
    store.create_run("r1", "r1", json.dumps(spec), str(settings.runs_dir / "r1" / "spec.yaml"))
    run = store.get_run("r1")
    assert run is not None
    anyio.run(daemon.submit_attempt, run)
    [req] = slurm.requests
    return req, store, run


def test_by_default_the_driver_runs_under_the_runner_copied_into_the_jobs_log_folder(tmp_path: Path) -> None:
    logs = tmp_path / "shared" / "logs"
    req, store, _ = submit(tmp_path, {"name": "r1", "command": ["python", "t.py"], "log_dir": str(logs)})
    script = logs / "r1-runner.sh"
    assert list(req.script_args) == ["sh", str(script), "python", "t.py"]
    assert script.read_text() == runner.script_text()
    assert not (tmp_path / "root" / "runs" / "r1" / runner.RUNNER).exists()  # nothing read from the root
    attempt = store.get_attempt("r1", 1)
    assert attempt is not None
    assert attempt.overrides["runner"] is True and attempt.overrides[runner.BY_RUN] is True
    assert runner.attempt_key("r1", 1, attempt.overrides) == "r1-a1"


def test_a_container_gets_the_log_folder_mounted_by_shepherd(tmp_path: Path) -> None:
    logs = tmp_path / "shared" / "logs"
    spec = {"name": "r1", "command": ["python", "t.py"], "log_dir": str(logs)}
    req, _, _ = submit(tmp_path, {**spec, "container": {"image": "img", "mounts": ["/data:/data"]}})
    assert req.env["MOUNTS"] == f"/data:/data,{logs}:{logs}"


def test_in_place_false_submits_the_driver_as_it_is(tmp_path: Path) -> None:
    logs = tmp_path / "shared" / "logs"
    spec = {"name": "r1", "command": ["python", "t.py"], "log_dir": str(logs), "resume": {"in_place": False}}
    req, store, _ = submit(tmp_path, spec)
    assert list(req.script_args) == ["python", "t.py"]
    assert not (logs / "r1-runner.sh").exists()
    attempt = store.get_attempt("r1", 1)
    assert attempt is not None and "runner" not in attempt.overrides


def test_a_runner_that_cannot_be_written_leaves_the_job_as_it_would_be_without_restart_in_place(
    tmp_path: Path,
) -> None:
    logs = tmp_path / "shared" / "logs"
    (logs / "r1-runner.sh").mkdir(parents=True)  # the copy cannot land there (as on a full filesystem)
    req, store, _ = submit(tmp_path, {"name": "r1", "command": ["python", "t.py"], "log_dir": str(logs)})
    assert list(req.script_args) == ["python", "t.py"]
    attempt = store.get_attempt("r1", 1)
    assert attempt is not None and "runner" not in attempt.overrides  # its resumes go through Slurm
