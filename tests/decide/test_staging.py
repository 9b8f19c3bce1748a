"""Resuming a trainer that always takes its newest step_N (NeMo RL) from best / step_N: choice and staging."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from supervisor.act.checkpoints import stage, stage_or_choose
from supervisor.decide.checkpoints import Checkpoint
from supervisor.decide.staging import fresh_name, place, trainer_dir

ORIG, S = "/ck", "/ck.staged/r/attempt-2"


def cps(*steps_metrics: tuple[int, float | None]) -> list[Checkpoint]:
    return [Checkpoint(f"step_{s}", s, m) for s, m in steps_metrics]


def test_best_that_is_not_the_newest_is_staged() -> None:
    p = place({ORIG: cps((10, 0.2), (20, 0.9), (30, 0.4))}, "best", lineage=ORIG)
    assert (p.source_dir, p.checkpoint and p.checkpoint.name, p.stage) == (ORIG, "step_20", True)
    assert "best" in p.reason and "step_30 is newer" in p.reason


def test_latest_is_never_staged_and_best_equal_to_newest_is_not_either() -> None:
    found = {ORIG: cps((10, 0.2), (20, 0.9))}
    assert place(found, "latest", lineage=ORIG).stage is False
    p = place(found, "best", lineage=ORIG)
    assert p.checkpoint is not None and p.checkpoint.name == "step_20" and p.stage is False


def test_latest_follows_the_lineage_not_the_abandoned_newer_steps_of_the_original() -> None:
    # Attempt 2 trained in S from step_20 (linked) and wrote step_25; the original still holds step_30.
    found = {ORIG: cps((10, 0.2), (20, 0.9), (30, 0.4)), S: cps((20, 0.9), (25, 0.5))}
    p = place(found, "latest", lineage=S)
    assert (p.source_dir, p.checkpoint and p.checkpoint.name, p.stage) == (S, "step_25", False)


def test_best_ranks_both_dirs_and_prefers_the_lineage_copy_on_a_tie() -> None:
    found = {ORIG: cps((10, 0.2), (20, 0.9), (30, 0.4)), S: cps((20, 0.9), (25, 0.95))}
    p = place(found, "best", lineage=S)
    assert (p.source_dir, p.checkpoint and p.checkpoint.name, p.stage) == (S, "step_25", False)
    found[S] = cps((20, 0.9), (25, 0.1))
    p = place(found, "best", lineage=S)
    assert (p.source_dir, p.checkpoint and p.checkpoint.name, p.stage) == (S, "step_20", True)


def test_step_n_prefers_the_lineage_and_a_missing_step_falls_back() -> None:
    found = {ORIG: cps((10, None), (20, None)), S: cps((10, None), (15, None))}
    p = place(found, "step_10", lineage=S)
    assert (p.source_dir, p.stage) == (S, True)
    p = place(found, "step_99", lineage=S)
    assert p.checkpoint is not None and p.checkpoint.name == "step_15" and "step_99 not found" in p.reason


def test_a_vanished_checkpoint_falls_back_and_none_at_all_starts_from_scratch() -> None:
    found = {ORIG: cps((10, 0.2), (20, 0.9), (30, 0.4))}
    p = place(found, "best", lineage=ORIG, exists=lambda d, n: n != "step_20")
    assert p.checkpoint is not None and p.checkpoint.name == "step_30" and "step_20 vanished" in p.reason
    assert place({ORIG: []}, "best", lineage=ORIG).checkpoint is None


def test_fresh_name_never_reuses_a_staged_dir() -> None:
    assert fresh_name([], 3) == "attempt-3"
    assert fresh_name(["attempt-3", "attempt-3.2"], 3) == "attempt-3.3"


def write_step(d: Path, step: int, acc: float) -> None:
    (d / f"step_{step}").mkdir(parents=True)
    (d / f"step_{step}" / "training_info.json").write_text(json.dumps({"step": step, "val:accuracy": acc}))


def test_resolve_stages_a_hard_linked_copy_and_leaves_the_original_dir_alone(tmp_path: Path) -> None:
    ck = tmp_path / "ck"
    for step, acc in ((10, 0.2), (20, 0.9), (30, 0.4)):
        write_step(ck, step, acc)
    before = sorted(p.name for p in ck.iterdir())
    path, _ = stage_or_choose(ck, "best", run_id="r1", attempt=2, metric="val:accuracy")
    assert path is not None and Path(path).name == "step_20"
    staged = Path(path).parent
    assert staged == tmp_path / "ck.staged" / "r1" / "attempt-2"
    assert Path(path).is_dir() and not Path(path).is_symlink()
    info = Path(path) / "training_info.json"
    assert info.stat().st_ino == (ck / "step_20" / "training_info.json").stat().st_ino  # linked, not copied
    assert sorted(p.name for p in staged.iterdir()) == ["step_20"]
    assert sorted(p.name for p in ck.iterdir()) == before
    assert trainer_dir(ck, path) == str(staged)
    # Attempt 2 trains in the staged dir; a later `latest` continues there, `best` looks at both dirs.
    write_step(staged, 25, 0.95)
    path, _ = stage_or_choose(
        ck, "latest", run_id="r1", attempt=3, lineage=str(staged), metric="val:accuracy"
    )
    assert path == str(staged / "step_25")
    path, _ = stage_or_choose(
        ck, "step_30", run_id="r1", attempt=3, lineage=str(staged), metric="val:accuracy"
    )
    assert path is not None and trainer_dir(ck, path) is None  # step_30 is the original's newest: no stage


def test_stage_links_into_a_fresh_dir_when_one_exists(tmp_path: Path) -> None:
    write_step(tmp_path / "ck", 10, 0.1)
    first = stage(tmp_path / "root", tmp_path / "ck" / "step_10", 2)
    second = stage(tmp_path / "root", tmp_path / "ck" / "step_10", 2)
    assert (first.name, second.name) == ("attempt-2", "attempt-2.2")


def test_retention_deleting_the_staged_step_deletes_nothing_of_the_users(tmp_path: Path) -> None:
    """NeMo RL v0.6.0 `rmtree`s a step that drops out of its top-k, inside the save: it must not raise, and
    the user's checkpoint must keep every file."""
    ck = tmp_path / "ck"
    for step, acc in ((10, 0.2), (20, 0.9), (30, 0.4)):
        write_step(ck, step, acc)
    weights = ck / "step_20" / "policy" / "weights"
    weights.mkdir(parents=True)
    (weights / "model.safetensors").write_bytes(b"w" * 1000)
    path, _ = stage_or_choose(ck, "best", run_id="r1", attempt=2, metric="val:accuracy")
    assert path is not None
    shutil.rmtree(path)  # what NeMo RL's retention does; a symlink would raise OSError here
    assert (ck / "step_20" / "policy" / "weights" / "model.safetensors").read_bytes() == b"w" * 1000
    assert (ck / "step_20" / "training_info.json").is_file()


def test_a_rollback_stages_the_best_checkpoint_before_the_divergence_even_if_later_ones_rank_higher() -> None:
    found = {ORIG: cps((10, 0.2), (20, 0.5), (30, 0.9), (40, 0.1))}
    p = place(found, "best", lineage=ORIG, before_step=25)
    assert (p.checkpoint and p.checkpoint.name, p.stage) == ("step_20", True)
    assert "best before step 25" in p.reason
    assert place(found, "best", lineage=ORIG, before_step=10).checkpoint is None
