"""`checkpoint.tune_interval` at submission: the next attempt's command carries `checkpointing.save_period=N`
(Young/Daly's interval, held to a period that keeps every kept step), recorded with the attempt; a person's
`--set` of the key wins, and a run that does not tune gets nothing added."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from supervisor.act import interval
from supervisor.daemon.compose import build
from supervisor.domain.runs import RunRow, RunState
from supervisor.settings import Settings
from supervisor.slurm.client import SlurmClient, SubmitRequest
from supervisor.store import Store
from tests.support.failures import Clock, failed_hours

RUN = "tuned-20261127-000000-abcd"


class RecordingSlurm(SlurmClient):
    def __init__(self) -> None:
        super().__init__(user="root")
        self.requests: list[SubmitRequest] = []

    async def submit(self, req: SubmitRequest) -> str:
        self.requests.append(req)
        return str(200 + len(self.requests))


def submit_next(tmp_path: Path, *, tune: bool = True, person_set: bool = False) -> tuple[list[str], Store]:
    """A run whose three attempts each failed after an hour, kept step_20 and step_40 (a minute a save), and
    is resubmitted: the argv of its next job."""
    ck = tmp_path / "ck"
    for s in (20, 40):
        (ck / f"step_{s}").mkdir(parents=True)
        (ck / f"step_{s}" / "training_info.json").write_text("{}")
    clock = Clock(1_800_000_000.0)
    store = Store(tmp_path / "s.sqlite3", clock=clock)
    command = ["python", "run_grpo.py", "checkpointing.save_period=10"]
    spec = {"name": "tuned", "command": command, "checkpoint": {"dir": str(ck), "tune_interval": tune}}
    store.create_run(RUN, "tuned", json.dumps(spec), str(tmp_path / "spec.yaml"))
    failed_hours(store, clock, RUN, 3)
    if person_set:
        key = "command+checkpointing.save_period"
        change = {"actor": "cli:me", "key": key, "old": command[-1], "new": "checkpointing.save_period=5"}
        spec["command"] = [*command[:-1], "checkpointing.save_period=5"]
        store.set_spec(RUN, json.dumps(spec), [("spec-changed", "changed", change)])
    store.set_run_state(RUN, RunState.BACKOFF, next_action_at=clock.now)
    slurm = RecordingSlurm()
    daemon = build(Settings(root=tmp_path / "root"), store=store, slurm=slurm, clock=clock).daemon
    run = store.get_run(RUN)
    assert isinstance(run, RunRow)
    anyio.run(daemon.submit_attempt, run)
    [req] = slurm.requests
    return list(req.script_args), store


@pytest.fixture(autouse=True)
def a_minute_a_save(monkeypatch: pytest.MonkeyPatch) -> None:
    # The file timing is tested on real dirs in tests/act/test_interval.py.
    monkeypatch.setattr(interval, "timed_saves", lambda dirs: [60.0 for _ in dirs])


def test_the_next_attempt_saves_at_the_tuned_period_and_it_is_recorded(tmp_path: Path) -> None:
    argv, store = submit_next(tmp_path)
    # Young/Daly: sqrt(2 x 60 s x 1 h) = 66 steps of 10 s; 20 is the nearest period dividing step_20, step_40.
    assert "checkpointing.save_period=20" in argv and "checkpointing.save_period=10" not in argv
    last = store.latest_attempt(RUN)
    assert last is not None and last.overrides["save_period"] == 20


def test_a_persons_setting_wins(tmp_path: Path) -> None:
    argv, _ = submit_next(tmp_path, person_set=True)
    assert [a for a in argv if a.startswith("checkpointing.save_period=")] == ["checkpointing.save_period=5"]


def test_a_run_that_does_not_tune_runs_its_own_period(tmp_path: Path) -> None:
    argv, store = submit_next(tmp_path, tune=False)
    assert [a for a in argv if a.startswith("checkpointing.save_period=")] == ["checkpointing.save_period=10"]
    last = store.latest_attempt(RUN)
    assert last is not None and last.overrides["save_period"] is None
