"""`shepherd history RUN`: attempts, decisions and changes in the order they happened, each with who made it;
actors recorded as uids read as account names."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from supervisor.cli.common import actor, readable_actors, user_name
from supervisor.cli.history import DAEMON, SLURM, history, history_lines
from supervisor.cli.main import main
from supervisor.domain.runs import RunState
from supervisor.settings import Settings
from supervisor.store import Store

RUN = "toy-20261127-000000-abcd"


class Clock:
    def __init__(self) -> None:
        self.t = 1_800_000_000.0

    def __call__(self) -> float:
        self.t += 1.0
        return self.t


def story(tmp_path: Path) -> tuple[Settings, Store]:
    """Attempt 1 fails with an OOM, a rule resumes with a smaller batch, a person holds and resumes it."""
    s = Settings(root=tmp_path / "root")
    s.ensure_dirs()
    store = Store(s.db_path, clock=Clock())
    store.create_run(RUN, "toy", json.dumps({"name": "toy", "command": ["true"]}), "/x")
    store.begin_attempt(RUN, lambda n: f"t{n}", {})
    store.attempt_submitted(RUN, 1, "101")
    store.observe_attempt(RUN, 1, slurm_state="RUNNING", reason=None, nodes="n1", started=True)
    store.observe_attempt(RUN, 1, slurm_state="FAILED", reason=None, nodes="n1", exit_code=1, ended=True)
    store.record_decision(
        RUN, 1, rule="cuda-oom", action="resume", signature="oom", reason="CUDA out of memory", evidence={}
    )
    store.set_run_state(
        RUN, RunState.BACKOFF, held=True, event=("held", "held by cli:0", {"actor": "cli:0"}), attempt=1
    )
    store.add_event(RUN, 1, "resume-scheduled", "resuming from step_4", {"rule": "cuda-oom"})
    store.add_event(RUN, None, "spec-changed", "grpo.max_num_steps: 6 -> 8", {"actor": "cli:alice"})
    store.begin_attempt(
        RUN,
        lambda n: f"t{n}",
        {"checkpoint": "/ck/step_4", "env": {"BATCH": "4"}, "reason": "cuda-oom: batch 4"},
    )
    store.attempt_submitted(RUN, 2, "102")
    return s, store


def test_the_story_is_told_in_order_with_who_did_each_thing(tmp_path: Path) -> None:
    _, store = story(tmp_path)
    entries = history(store.attempts(RUN), store.decisions(RUN), store.events(RUN))
    told = [(x.attempt, x.kind, x.by, x.text) for x in entries]
    root = user_name(0)
    assert told == [
        (None, "queued", DAEMON, f"run {RUN} claimed from the queue"),
        (1, "submitted", DAEMON, "attempt 1 submitted: Slurm job 101"),
        (1, "started", SLURM, "attempt 1 running on n1"),
        (1, "ended", SLURM, "attempt 1 ended: FAILED exit 1"),
        (1, "decision", "rule cuda-oom", "resume: CUDA out of memory"),
        (1, "held", f"cli:{root}", f"held by cli:{root}"),
        (1, "resume-scheduled", "rule cuda-oom", "resuming from step_4"),
        (None, "spec-changed", "cli:alice", "grpo.max_num_steps: 6 -> 8"),
        (2, "changed", "rule cuda-oom", "env BATCH=4"),
        (2, "submitted", DAEMON, "attempt 2 submitted: Slurm job 102 from /ck/step_4"),
    ]
    lines = history_lines(entries)
    assert lines[4].endswith("#1  decision         rule cuda-oom            resume: CUDA out of memory")


def test_history_prints_lines_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    s, store = story(tmp_path)
    store.close()
    assert main(["--root", str(s.root), "history", "toy"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"history of {RUN} (PENDING)"
    assert len(out) == 11
    assert main(["--root", str(s.root), "history", "toy", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [d["kind"] for d in data][:5] == ["queued", "submitted", "started", "ended", "decision"]
    assert data[7] == {
        "at": data[7]["at"],
        "attempt": None,
        "kind": "spec-changed",
        "by": "cli:alice",
        "text": "grpo.max_num_steps: 6 -> 8",
        "data": {"actor": "cli:alice"},
    }


def test_a_cli_action_is_recorded_under_the_account_name_not_the_uid() -> None:
    assert actor() == f"cli:{user_name(os.getuid())}"
    assert (
        readable_actors("resume requested by cli:0: from step_4")
        == f"resume requested by cli:{user_name(0)}: from step_4"
    )
    assert readable_actors("by cli:alice") == "by cli:alice"


def test_a_uid_without_an_account_stays_a_uid() -> None:
    assert user_name(2_000_000_123) == "2000000123"
