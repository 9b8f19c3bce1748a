"""A run's secrets at submission: its env_files and kept pass_env values reach sbatch's environment (and
nothing of the daemon's tokens does), are registered with redact(), also after a restart; an env file that is
not private fails the run with the reason instead of submitting it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from supervisor.daemon.compose import build
from supervisor.daemon.loops import Daemon
from supervisor.domain.envfiles import PASS_ENV_FILE, write_private_env_file
from supervisor.domain.runs import RunRow, RunState
from supervisor.redact import MASK, clear_known_secrets, mask_known
from supervisor.settings import Settings
from supervisor.slurm.client import SlurmClient, SubmitRequest
from supervisor.store import Store

FILE_VALUE = "wandbfile-0123456789abcdef"
PASSED_VALUE = "passvalue-0123456789abcdef"
BOT = "xoxb-1111-2222-daemonsowntoken"


class RecordingSlurm(SlurmClient):
    def __init__(self) -> None:
        super().__init__(user="root")
        self.requests: list[SubmitRequest] = []

    async def submit(self, req: SubmitRequest) -> str:
        self.requests.append(req)
        return str(100 + len(self.requests))


@pytest.fixture(autouse=True)
def fresh_registry() -> Iterator[None]:
    clear_known_secrets()
    yield
    clear_known_secrets()


def setup(tmp_path: Path, mode: int = 0o600) -> tuple[Daemon, Store, RecordingSlurm, RunRow]:
    wandb = tmp_path / "wandb.env"
    wandb.write_text(f"WANDB_API_KEY={FILE_VALUE}\n")
    wandb.chmod(mode)
    settings = Settings(root=tmp_path / "root")
    store = Store(tmp_path / "s.sqlite3")
    slurm = RecordingSlurm()
    daemon = build(settings, store=store, slurm=slurm).daemon
    spec = {"name": "r1", "command": ["env"], "env_files": [str(wandb)], "pass_env": ["MY_PASSED"]}
    run_dir = settings.runs_dir / "r1"
    run_dir.mkdir(parents=True)
    write_private_env_file(run_dir / PASS_ENV_FILE, {"MY_PASSED": PASSED_VALUE})
    store.create_run("r1", "r1", json.dumps(spec), str(run_dir / "spec.yaml"))
    run = store.get_run("r1")
    assert run is not None
    return daemon, store, slurm, run


def test_the_secrets_reach_sbatch_and_are_masked_from_then_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLACK_BOT_TOKEN", BOT)
    daemon, _store, slurm, run = setup(tmp_path)
    anyio.run(daemon.submit_attempt, run)
    [req] = slurm.requests
    assert req.env["WANDB_API_KEY"] == FILE_VALUE and req.env["MY_PASSED"] == PASSED_VALUE
    assert "SLACK_BOT_TOKEN" not in req.env and BOT not in json.dumps(dict(req.env))
    assert mask_known(f"seen {FILE_VALUE} and {PASSED_VALUE}") == f"seen {MASK} and {MASK}"


def test_after_a_restart_the_unfinished_runs_secrets_are_masked_before_any_line_is_read(
    tmp_path: Path,
) -> None:
    daemon, _store, _slurm, _run = setup(tmp_path)
    daemon.learn_run_secrets()
    assert mask_known(f"{FILE_VALUE} {PASSED_VALUE}") == f"{MASK} {MASK}"


def test_an_env_file_others_can_read_fails_the_run_saying_why_and_submits_nothing(tmp_path: Path) -> None:
    daemon, store, slurm, run = setup(tmp_path, mode=0o644)
    assert anyio.run(daemon.submit_attempt, run) is None
    assert slurm.requests == []
    failed = store.get_run("r1")
    assert failed is not None and failed.state == RunState.FAILED
    assert "wandb.env: readable or writable by group or others (mode 644)" in (failed.final_reason or "")
    assert "shepherd resume r1" in (failed.final_reason or "") and FILE_VALUE not in (
        failed.final_reason or ""
    )


def test_a_token_file_gone_unreadable_does_not_stop_submissions(tmp_path: Path) -> None:
    daemon, _store, slurm, run = setup(tmp_path)
    bad = tmp_path / "slack.env"
    bad.write_text(f"SLACK_BOT_TOKEN={BOT}\n")
    bad.chmod(0o644)
    daemon.settings = Settings(root=tmp_path / "root", slack={"token_file": str(bad)})
    anyio.run(daemon.submit_attempt, run)
    [req] = slurm.requests
    assert req.env["WANDB_API_KEY"] == FILE_VALUE and BOT not in json.dumps(dict(req.env))
