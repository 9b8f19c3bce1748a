"""Whether a run that exited 0 is finished, from its newest checkpoint's own config.yaml."""

from __future__ import annotations

import json
from pathlib import Path

from supervisor.act.checkpoints import keep_the_choice, max_steps, unfinished
from supervisor.domain.overrides import AttemptOverrides
from supervisor.domain.spec import JobSpec


def save(ck: Path, step: int, max_num_steps: int | None) -> None:
    d = ck / f"step_{step}"
    d.mkdir(parents=True)
    (d / "training_info.json").write_text(json.dumps({"current_step": step}))
    if max_num_steps is not None:
        (d / "config.yaml").write_text(
            f"grpo:\n  max_num_steps: {max_num_steps}\ncheckpointing:\n  save_period: 10\n"
        )


def spec(ck: Path) -> JobSpec:
    return JobSpec.model_validate({"name": "r", "command": "x", "checkpoint": {"dir": str(ck)}})


def test_a_newest_checkpoint_below_max_num_steps_means_the_run_has_steps_left(tmp_path: Path) -> None:
    save(tmp_path / "ck", 10, 100)
    save(tmp_path / "ck", 20, 100)
    assert (
        unfinished(spec(tmp_path / "ck")) == "its newest checkpoint step_20 is below grpo.max_num_steps=100"
    )


def test_a_checkpoint_at_max_steps_or_without_a_config_means_done(tmp_path: Path) -> None:
    save(tmp_path / "a", 100, 100)
    save(tmp_path / "b", 20, None)
    assert unfinished(spec(tmp_path / "a")) is None and unfinished(spec(tmp_path / "b")) is None
    assert unfinished(JobSpec.model_validate({"name": "r", "command": "x"})) is None  # no checkpoint dir


def test_the_lineage_a_staged_attempt_trained_in_is_where_its_progress_is(tmp_path: Path) -> None:
    save(tmp_path / "ck", 40, 100)
    save(tmp_path / "staged", 100, 100)
    assert unfinished(spec(tmp_path / "ck"), lineage=str(tmp_path / "staged")) is None


def test_a_config_that_is_not_a_mapping_or_says_nonsense_is_ignored(tmp_path: Path) -> None:
    d = tmp_path / "step_5"
    d.mkdir()
    for text in ("- a list\n", "grpo: {max_num_steps: -3}\n", "grpo: {max_num_steps: true}\n", ": : :\n"):
        (d / "config.yaml").write_text(text)
        assert max_steps(d) is None


def test_a_rollback_overtaken_by_the_dying_jobs_last_save_is_staged_at_submission(tmp_path: Path) -> None:
    """Rolled back to step_32; scancel's SIGTERM made the trainer save step_34 on its way out. A trainer that
    resumes from its dir's newest step would load step_34, so step_32 is staged for it."""
    ck = tmp_path / "ck"
    for step in (30, 32, 34):
        save(ck, step, 100)
    chosen = AttemptOverrides(checkpoint=str(ck / "step_32"), pinned=True)
    got = keep_the_choice(spec(ck), chosen, run_id="r1", attempt=2)
    assert got.checkpoint_dir is not None and Path(got.checkpoint_dir).parent != ck
    assert got.checkpoint == str(Path(got.checkpoint_dir) / "step_32")
    assert sorted(p.name for p in Path(got.checkpoint_dir).iterdir()) == ["step_32"]
    assert (ck / "step_34").is_dir()  # the user's checkpoints are left as they are


def test_a_choice_still_newest_or_not_pinned_is_submitted_as_it_is(tmp_path: Path) -> None:
    ck = tmp_path / "ck"
    save(ck, 32, 100)
    newest = AttemptOverrides(checkpoint=str(ck / "step_32"), pinned=True)
    assert keep_the_choice(spec(ck), newest, run_id="r1", attempt=2) == newest
    save(ck, 34, 100)
    latest = AttemptOverrides(checkpoint=str(ck / "step_32"))  # `latest`: the newer save is welcome
    assert keep_the_choice(spec(ck), latest, run_id="r1", attempt=2) == latest


def test_a_pinned_choice_is_staged_while_the_old_job_is_still_completing(tmp_path: Path) -> None:
    """Slurm marks a scancelled job COMPLETING at once; its trainer may save step_34 after this look (seen
    under load: the resumed attempt then loaded the NaN weights). Until the job ended, step_32 is staged."""
    ck = tmp_path / "ck"
    for step in (30, 32):
        save(ck, step, 100)
    chosen = AttemptOverrides(checkpoint=str(ck / "step_32"), pinned=True)
    got = keep_the_choice(spec(ck), chosen, run_id="r1", attempt=2, settled=False)
    assert got.checkpoint_dir is not None and Path(got.checkpoint_dir).parent != ck
    save(ck, 34, 100)  # the dying trainer's last save
    assert sorted(p.name for p in Path(got.checkpoint_dir).iterdir()) == ["step_32"]
