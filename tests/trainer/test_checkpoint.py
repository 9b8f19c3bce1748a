"""trainer/checkpoint: when the Checkpointer saves, what a save leaves on disk, retention, and atomicity."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from trainer import checkpoint as ckpt
from trainer.checkpoint import Checkpointer, RunInfo
from trainer.config import CheckpointingConfig

INFO_KEYS = {
    "step",
    "total_steps",
    "consumed_samples",
    "consumed_prompts",
    "metrics",
    "config_hash",
    "exp_dir",
    "saved_at",
}


class Status:
    """Records what a save tells status.json."""

    def __init__(self) -> None:
        self.updates: list[dict[str, Any]] = []

    def update(self, **fields: Any) -> None:
        self.updates.append(fields)

    def last(self, key: str) -> Any:
        return [u[key] for u in self.updates if key in u][-1]


def _checkpointer(
    tmp_path: Path,
    *,
    write_state: Any = None,
    clock: Any = None,
    **cfg: Any,
) -> tuple[Checkpointer, Status]:
    status = Status()

    def write(directory: Path, step: int) -> None:
        (directory / "state.txt").write_text(f"step {step}")

    c = Checkpointer(
        CheckpointingConfig(**{"checkpoint_dir": str(tmp_path), "keep_top_k": None, **cfg}),
        tmp_path,
        RunInfo(total_steps=10, config_hash="0123456789abcdef", exp_dir="exp_001"),
        write_state=write_state or write,
        consumed=lambda: (4, 16),
        status=status,
        started_at=1000.0,
        **({"clock": clock} if clock else {}),
    )
    return c, status


def _steps_on_disk(d: Path) -> list[int]:
    return [s for s, _ in ckpt.complete_checkpoints(d)]


def _run(c: Checkpointer, last: int, metric: dict[int, float] | None = None) -> list[int]:
    """Call save once per step like the loop does; return the steps that saved."""
    saved = []
    for step in range(1, last + 1):
        m = {"val/accuracy": metric[step]} if metric else {}
        if c.save(step, m, last_step=step == last, stopping=False) is not None:
            saved.append(step)
    return saved


# -- when -----------------------------------------------------------------------------------------------


def test_saves_every_save_period_steps_and_at_the_last_step(tmp_path: Path) -> None:
    c, _ = _checkpointer(tmp_path, save_period=3)
    assert _run(c, 10) == [3, 6, 9, 10]
    assert _steps_on_disk(tmp_path) == [3, 6, 9, 10]


def test_disabled_checkpointing_never_saves(tmp_path: Path) -> None:
    c, status = _checkpointer(tmp_path / "ckpt", save_period=1, enabled=False)
    assert _run(c, 4) == []
    assert c.save_before_stop(4, {}) is None
    assert not (tmp_path / "ckpt").exists() and status.updates == []


def test_a_stopping_step_is_saved_once_by_the_stop_save(tmp_path: Path) -> None:
    c, _ = _checkpointer(tmp_path, save_period=10)
    assert c.due(4, last_step=False, stopping=True)  # so the loop validates before it
    assert c.save(4, {}, last_step=False, stopping=True) is None  # left to the stop save
    assert c.save_before_stop(4, {}) == tmp_path / "step_4"
    assert c.save_before_stop(4, {}) is None  # already on disk: not written twice
    assert c.save_before_stop(0, {}) is None  # nothing trained yet
    assert _steps_on_disk(tmp_path) == [4]


def test_deadline_is_near_when_two_recent_steps_no_longer_fit(tmp_path: Path) -> None:
    now = [1050.0]  # 50 s after the start; a 60 s budget leaves 10 s
    c, _ = _checkpointer(tmp_path, checkpoint_must_save_by="00:01:00", clock=lambda: now[0])
    assert not c.deadline_near([])  # needs 5 s
    assert not c.deadline_near([2.0])  # needs 9 s
    assert c.deadline_near([3.0])  # needs 11 s
    assert not c.deadline_near([9.0, 1, 1, 1, 1, 1])  # only the last five steps count
    now[0] = 1056.0
    assert c.deadline_near([])
    none, _ = _checkpointer(tmp_path, clock=lambda: 10.0**9)
    assert not none.deadline_near([100.0])  # no checkpoint_must_save_by: no deadline


def test_deadline_stop_save_writes_the_step(tmp_path: Path) -> None:
    c, status = _checkpointer(
        tmp_path, save_period=100, checkpoint_must_save_by="00:10", clock=lambda: 1599.0
    )
    assert [c.save(s, {}, last_step=False, stopping=False) for s in (1, 2, 3)] == [None] * 3
    assert c.deadline_near([1.0])  # 1 s left: the loop stops, and the stop save writes the step
    assert c.save_before_stop(3, {"train/loss": 0.5}) == tmp_path / "step_3"
    assert status.last("last_checkpoint") == str(tmp_path / "step_3")


def test_validation_is_needed_only_for_val_metrics(tmp_path: Path) -> None:
    assert _checkpointer(tmp_path, metric_name="val:accuracy")[0].needs_validation
    assert not _checkpointer(tmp_path, metric_name="train:reward_mean")[0].needs_validation


# -- how ------------------------------------------------------------------------------------------------


def test_a_save_writes_the_contract_files(tmp_path: Path) -> None:
    c, status = _checkpointer(tmp_path, save_period=2, clock=lambda: 1234.5)
    final = c.save(2, {"val/accuracy": 0.75}, last_step=False, stopping=False)
    assert final == tmp_path / "step_2"
    assert (final / "state.txt").read_text() == "step 2"
    info = json.loads((final / ckpt.INFO).read_text())
    assert set(info) == INFO_KEYS
    assert info == {
        "step": 2,
        "total_steps": 10,
        "consumed_samples": 16,
        "consumed_prompts": 4,
        "metrics": {"val/accuracy": 0.75},
        "config_hash": "0123456789abcdef",
        "exp_dir": "exp_001",
        "saved_at": 1234.5,
    }
    latest = json.loads((tmp_path / ckpt.STATUS).read_text())
    assert latest == {"step": 2, "path": str(final), "complete": True, "saved_at": 1234.5}
    assert status.updates[0]["state"] == "checkpointing"
    assert status.last("last_checkpoint") == str(final)
    assert status.last("best_checkpoint") == str(final) and status.last("best_metric") == 0.75
    assert sorted(p.name for p in tmp_path.iterdir()) == [ckpt.STATUS, "step_2"]  # no tmp_step_2 left


def test_a_tmp_step_is_never_reported_as_a_checkpoint(tmp_path: Path) -> None:
    seen: list[Any] = []
    status_box: list[Status] = []

    def write(directory: Path, step: int) -> None:
        assert directory == tmp_path / f"tmp_step_{step}"
        # mid-save: nothing may call this a checkpoint yet
        seen.append((ckpt.latest_checkpoint(tmp_path), (tmp_path / ckpt.STATUS).exists()))
        seen.append([u for u in status_box[0].updates if "last_checkpoint" in u])
        if step == 4:
            raise OSError("disk full")  # a save that dies before the rename

    c, status = _checkpointer(tmp_path, save_period=2, write_state=write)
    status_box.append(status)
    c.save(2, {}, last_step=False, stopping=False)
    assert seen == [(None, False), []]
    with pytest.raises(OSError):
        c.save(4, {}, last_step=False, stopping=False)
    assert (tmp_path / "tmp_step_4").is_dir()
    assert ckpt.latest_checkpoint(tmp_path) == tmp_path / "step_2"
    assert json.loads((tmp_path / ckpt.STATUS).read_text())["step"] == 2
    assert status.last("last_checkpoint") == str(tmp_path / "step_2")
    # the next start resumes from step_2 and removes the leftover
    assert ckpt.find_resume_point(tmp_path, enabled=True, resume_from=None) == tmp_path / "step_2"
    assert not (tmp_path / "tmp_step_4").exists()


def test_retention_keeps_the_top_k_plus_the_latest(tmp_path: Path) -> None:
    c, status = _checkpointer(tmp_path, save_period=1, keep_top_k=2)
    _run(c, 6, metric={1: 0.5, 2: 0.9, 3: 0.1, 4: 0.7, 5: 0.2, 6: 0.3})
    assert _steps_on_disk(tmp_path) == [2, 4, 6]  # the two best, and the latest though it ranks third
    assert status.last("best_checkpoint") == str(tmp_path / "step_2") and status.last("best_metric") == 0.9


def test_resume_from_must_name_a_complete_checkpoint(tmp_path: Path) -> None:
    (tmp_path / "step_3").mkdir()
    with pytest.raises(FileNotFoundError, match="not a complete checkpoint"):
        ckpt.find_resume_point(tmp_path, enabled=True, resume_from=str(tmp_path / "step_3"))
    assert ckpt.find_resume_point(tmp_path, enabled=False, resume_from=None) is None


def test_retention_keeps_top_k_by_metric_plus_the_latest() -> None:
    entries = [(1, 0.5), (2, 0.9), (3, 0.1), (4, 0.7), (5, 0.2)]
    assert ckpt.select_to_delete(entries, 2, higher_is_better=True) == [1, 3]  # keep 2, 4 and latest 5


def test_retention_ties_favour_the_newer_step_and_missing_metrics_go_first() -> None:
    assert ckpt.select_to_delete([(1, 0.5), (2, 0.5), (3, 0.5)], 2, True) == [1]
    assert ckpt.select_to_delete([(1, None), (2, 0.1), (3, 0.2)], 2, True) == [1]
    assert ckpt.select_to_delete([(1, 0.1), (2, 0.5), (3, 0.9)], 1, False) == [2]  # lower is better
    assert ckpt.select_to_delete([(1, 0.1), (2, 0.5)], None, True) == []


def test_apply_retention_deletes_directories_on_disk(tmp_path: Path) -> None:
    for step, acc in [(1, 0.9), (2, 0.1), (3, 0.5)]:
        d = tmp_path / f"step_{step}"
        d.mkdir()
        (d / ckpt.INFO).write_text(json.dumps({"step": step, "metrics": {"val/accuracy": acc}}))
    assert ckpt.apply_retention(tmp_path, "val:accuracy", 1, True) == [2]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step_1", "step_3"]
    assert ckpt.best_checkpoint(tmp_path, "val:accuracy", True)[1] == 0.9


def test_incomplete_checkpoints_are_never_resumed_and_get_cleaned(tmp_path: Path) -> None:
    (tmp_path / "step_2").mkdir()
    (tmp_path / "step_2" / ckpt.INFO).write_text("{}")
    (tmp_path / "tmp_step_4").mkdir()
    (tmp_path / "step_5").mkdir()  # no training_info.json: not complete
    assert ckpt.latest_checkpoint(tmp_path) == tmp_path / "step_2"
    ckpt.clean_stale_tmp(tmp_path)
    assert not (tmp_path / "tmp_step_4").exists()


def test_atomic_json_write_leaves_no_temp_files_and_replaces(tmp_path: Path) -> None:
    target = tmp_path / "status.json"
    ckpt.write_json_atomic(target, {"a": 1})
    ckpt.write_json_atomic(target, {"a": 2})
    assert json.loads(target.read_text()) == {"a": 2}
    assert [p.name for p in tmp_path.iterdir()] == ["status.json"]


def test_finalize_renames_tmp_to_step(tmp_path: Path) -> None:
    tmp = ckpt.tmp_dir_for(tmp_path, 3)
    (tmp / "policy").mkdir(parents=True)
    (tmp / "policy" / "w").write_text("x")
    final = ckpt.finalize(tmp_path, 3)
    assert final == tmp_path / "step_3" and (final / "policy" / "w").read_text() == "x"
    assert not tmp.exists()
