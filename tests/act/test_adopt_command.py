"""`adopt` compares the job's own command (main's ray.sub records it in <jobid>-logs/driver_command.sh) with
the spec's, which attempt 2 will run, and says every difference before it can matter."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio

from supervisor.act.adopt import adopt, command_notes
from supervisor.domain.changes import command_differences, recorded_command
from supervisor.domain.jobstate import JobState
from supervisor.domain.spec import JobSpec
from supervisor.settings import Settings
from supervisor.store import Store

SPEC = JobSpec.model_validate(
    {
        "name": "grpo",
        "command": "uv run examples/run_grpo.py grpo.max_num_steps=6 policy.lr=1e-6",
        "launcher": {"kind": "nemo-rl", "script": "/shared/RL/ray.sub"},
        "slurm": {"account": "a", "partition": "p"},
        "container": {"image": "img", "mounts": ["/shared:/shared"]},
    }
)
RECORDED = (
    "#!/bin/bash\n"
    "uv run examples/run_grpo.py grpo.max_num_steps=8 policy.lr=1e-6 "
    "checkpointing.checkpoint_must_save_by=00:03:50:00\n"
)


def recorded_in(base: Path, job_id: str, text: str = RECORDED) -> None:
    (base / f"{job_id}-logs").mkdir(parents=True)
    (base / f"{job_id}-logs" / "driver_command.sh").write_text(text)


def test_a_different_override_is_said_with_both_values(tmp_path: Path) -> None:
    recorded_in(tmp_path, "41")
    assert command_notes(str(tmp_path), "41", JobState.RUNNING, SPEC) == [
        "job 41 differs from the spec, whose command attempt 2 runs: grpo.max_num_steps: the job ran "
        "`grpo.max_num_steps=8`, the spec says `grpo.max_num_steps=6`"
    ]


def test_the_same_command_gives_no_note_and_the_save_deadline_is_shepherds_own(tmp_path: Path) -> None:
    recorded_in(tmp_path, "41", RECORDED.replace("=8", "=6"))
    assert command_notes(str(tmp_path), "41", JobState.RUNNING, SPEC) == []


def test_an_override_on_one_side_only_and_another_script_are_differences() -> None:
    words = recorded_command("uv run examples/run_sft.py grpo.max_num_steps=6 ++logger.wandb_enabled=true")
    assert words is not None
    assert command_differences(words, SPEC) == [
        "logger.wandb_enabled: the job ran `++logger.wandb_enabled=true`, the spec says none",
        "policy.lr: the job ran no policy.lr, the spec says `policy.lr=1e-6`",
        "command: the job ran `uv run examples/run_sft.py`, the spec says `uv run examples/run_grpo.py`",
    ]


def test_a_launcher_that_records_no_command_is_said_to_be_uncomparable(tmp_path: Path) -> None:
    (tmp_path / "41-logs").mkdir()  # v0.6.0's ray.sub: a log folder without driver_command.sh
    (note,) = command_notes(str(tmp_path), "41", JobState.RUNNING, SPEC)
    assert note.startswith("cannot compare job 41's command with the spec") and "v0.6.0" in note


def test_a_pending_job_has_not_recorded_it_yet(tmp_path: Path) -> None:
    (note,) = command_notes(str(tmp_path), "41", JobState.PENDING, SPEC)
    assert "has not started" in note


class FakeSlurm:
    def __init__(self, fields: dict[str, str]) -> None:
        self.fields = fields

    async def show_job(self, job_id: str) -> dict[str, Any]:
        return self.fields


def test_adoption_returns_the_differences_and_keeps_them_in_the_runs_history(tmp_path: Path) -> None:
    recorded_in(tmp_path / "work", "41")
    settings = Settings(root=tmp_path / "root")
    settings.ensure_dirs()
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text("name: grpo\n")
    store = Store(settings.db_path)
    slurm = FakeSlurm({"JobState": "RUNNING", "WorkDir": str(tmp_path / "work"), "StdOut": ""})
    run, notes = anyio.run(
        lambda: adopt(store, slurm, settings, "41", SPEC, spec_file)  # type: ignore[arg-type]
    )
    assert len(notes) == 1 and "grpo.max_num_steps" in notes[0]
    assert [e.message for e in store.events(run.id) if e.kind == "adopted-command"] == notes
