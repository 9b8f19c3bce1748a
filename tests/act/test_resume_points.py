"""A person's resume names a step that is there, one the trainer can be made to load; `shepherd checkpoints`
lists what is there (issue #30)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from supervisor.act.checkpoints import resolve_checkpoint, run_checkpoints
from supervisor.act.control import Controller, resume_point_refused
from supervisor.decide.checkpoints import Checkpoint
from supervisor.decide.staging import Kept, describe_kept, kept_steps
from supervisor.domain.runs import RunRow, RunState
from supervisor.domain.spec import JobSpec
from supervisor.ports import ControlError
from supervisor.store import Store


def save(ck: Path, step: int, accuracy: float | None) -> None:
    d = ck / f"step_{step}"
    d.mkdir(parents=True)
    info: dict[str, Any] = {"current_step": step}
    if accuracy is not None:
        info["val:accuracy"] = accuracy
    (d / "training_info.json").write_text(json.dumps(info))


def run_of(ck: Path, **spec: Any) -> RunRow:
    data = {"name": "r", "command": "x", "checkpoint": {"dir": str(ck), "metric": "val:accuracy"}, **spec}
    text = JobSpec.model_validate(data).model_dump_json()
    return RunRow("r-1", "r", text, "", RunState.FAILED, 0, 0, None, None, None, False)


NEMO = {
    "launcher": {"kind": "nemo-rl", "script": "/rl/ray.sub"},
    "container": {"image": "i", "mounts": ["/s:/s"]},
    "slurm": {"account": "a", "partition": "p"},
}


def test_kept_steps_mark_the_best_and_the_newest_of_the_lineage_each_step_once() -> None:
    found = {
        "/ck": [Checkpoint("step_4", 4, 0.3), Checkpoint("step_2", 2, 0.5)],
        "/st": [Checkpoint("step_6", 6, 0.4), Checkpoint("step_2", 2, 0.5)],
    }
    rows = kept_steps(found, lineage="/st")
    assert rows == [
        Kept("step_6", 6, 0.4, "/st", latest=True),
        Kept("step_4", 4, 0.3, "/ck"),
        Kept("step_2", 2, 0.5, "/st", best=True),
    ]
    assert describe_kept(rows, "val:accuracy") == (
        "step_6 (val:accuracy 0.4, latest), step_4 (val:accuracy 0.3), step_2 (val:accuracy 0.5, best)"
    )
    assert describe_kept([], None) == "no complete checkpoint yet"
    assert not any(k.best for k in kept_steps({"/ck": [Checkpoint("step_2", 2)]}, lineage="/ck"))


def test_a_step_that_is_not_there_is_refused_with_the_steps_that_are(tmp_path: Path) -> None:
    save(tmp_path / "ck", 2, 0.5)
    save(tmp_path / "ck", 4, 0.25)
    run = run_of(tmp_path / "ck", **NEMO)
    assert resume_point_refused(run, "step_99", None) == (
        "r-1 has no step_99; its checkpoints: step_4 (val:accuracy 0.25, latest), "
        "step_2 (val:accuracy 0.5, best)"
    )
    assert resume_point_refused(run, "step_2", None) is None  # NeMo RL is pointed at a staged step_2
    assert (
        resume_point_refused(run, "best", None) is None and resume_point_refused(run, "latest", None) is None
    )


def test_an_older_step_is_refused_for_a_trainer_shepherd_cannot_point_elsewhere(tmp_path: Path) -> None:
    save(tmp_path / "ck", 2, 0.5)
    save(tmp_path / "ck", 4, 0.25)
    run = run_of(tmp_path / "ck")  # our launcher, no pass_checkpoint, no checkpoint_dir_arg
    refused = resume_point_refused(run, "best", None)
    assert refused is not None and refused.startswith("cannot resume r-1 from step_2: this trainer resumes")
    assert resume_point_refused(run, "step_4", None) is None  # its newest: what it loads by itself


def test_without_a_checkpoint_dir_only_latest_can_be_asked_for(tmp_path: Path) -> None:
    run = RunRow(
        "r-1", "r", JobSpec(name="r", command="x").model_dump_json(), "", RunState.FAILED, 0, 0, None, None,
        None, False,
    )  # fmt: skip
    assert "names no checkpoint dir" in (resume_point_refused(run, "step_7", None) or "")
    assert resume_point_refused(run, "latest", None) is None


def test_a_rules_resume_from_best_it_cannot_carry_out_takes_the_newest_and_says_why(tmp_path: Path) -> None:
    save(tmp_path / "ck", 2, 0.5)
    save(tmp_path / "ck", 4, 0.25)
    path, why = resolve_checkpoint(run_of(tmp_path / "ck").spec, "best", run_id="r-1", attempt=2)
    assert path == str(tmp_path / "ck" / "step_4")
    assert why.startswith("best cannot be loaded (this trainer resumes from the newest step")
    assert not (tmp_path / "ck.staged").exists()


def test_run_checkpoints_reads_the_spec_dir_and_the_lineage(tmp_path: Path) -> None:
    save(tmp_path / "ck", 2, 0.5)
    save(tmp_path / "staged", 6, 0.75)
    rows = run_checkpoints(run_of(tmp_path / "ck").spec, str(tmp_path / "staged"))
    assert [(k.name, k.best, k.latest) for k in rows] == [("step_6", True, True), ("step_2", False, False)]


def test_the_controller_cli_and_slack_share_refuses_a_missing_step_and_leaves_the_run_as_it_was(
    tmp_path: Path,
) -> None:
    save(tmp_path / "ck", 2, 0.5)
    store = Store(tmp_path / "state.db")
    store.create_run("r-1", "r", run_of(tmp_path / "ck", **NEMO).spec_json, str(tmp_path / "spec.yaml"))
    store.set_run_state("r-1", RunState.FAILED, reason="stopped")
    controller = Controller(store, slurm=None)  # type: ignore[arg-type]
    with pytest.raises(ControlError, match=r"has no step_7; its checkpoints: step_2 \(val:accuracy 0.5, "):
        anyio.run(lambda: controller.resume("r-1", "step_7", "slack:U1"))
    run = store.get_run("r-1")
    assert run is not None and run.state == RunState.FAILED
