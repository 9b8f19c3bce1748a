"""The checkpoint interval's I/O: saves timed from real step dirs (a staged copy is not), the save period
read from the command and the checkpoints, and what the next attempt is passed (a person's setting wins)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from supervisor.act.checkpoints import link_tree
from supervisor.act.interval import (
    FileSide,
    StoreSide,
    command_period,
    complete_steps,
    config_save_period,
    file_side,
    next_save_period,
    period_in_use,
    timed_saves,
)
from supervisor.decide.interval import Exposure
from supervisor.domain.spec import JobSpec


def save_step(root: Path, step: int, period: int = 10) -> Path:
    """A complete checkpoint as NeMo RL writes it: info and config first, the weights, then the rename."""
    tmp = root / f"tmp_step_{step}"
    tmp.mkdir(parents=True)
    (tmp / "training_info.json").write_text(json.dumps({"step": step}))
    (tmp / "config.yaml").write_text(f"checkpointing:\n  save_period: {period}\n  keep_top_k: 3\n")
    (tmp / "policy").mkdir()
    (tmp / "policy" / "weights.bin").write_bytes(b"w" * 1024)
    final = root / f"step_{step}"
    tmp.rename(final)
    return final


def spec(command: list[str] | str, *, tune: bool = True, ckpt: Path = Path("/ck")) -> JobSpec:
    return JobSpec.model_validate(
        {"name": "r", "command": command, "checkpoint": {"dir": str(ckpt), "tune_interval": tune}}
    )


def test_a_fresh_save_is_timed_and_a_staged_copy_of_it_is_not(tmp_path: Path) -> None:
    step = save_step(tmp_path / "ck", 10)
    [took] = timed_saves([step])
    assert took >= 0.0
    # A staged copy: hard links keep the files' mtime; made "later" (mtime set back), its ctime gives it away.
    for f in (step / "training_info.json", step / "config.yaml"):
        os.utime(f, (1_000_000.0, 1_000_000.0))
    staged = tmp_path / "staged" / "step_10"
    staged.parent.mkdir()
    link_tree(step, staged)
    assert timed_saves([staged]) == []


def test_only_complete_steps_are_listed_newest_first(tmp_path: Path) -> None:
    ck = tmp_path / "ck"
    save_step(ck, 10)
    save_step(ck, 20)
    (ck / "tmp_step_30").mkdir()  # a save in progress
    (ck / "step_40").mkdir()  # interrupted: no training_info.json
    assert [s for s, _ in complete_steps(ck)] == [20, 10]
    assert complete_steps(tmp_path / "missing") == []


def test_the_checkpoints_config_says_which_period_wrote_them(tmp_path: Path) -> None:
    step = save_step(tmp_path / "ck", 10, period=5)
    assert config_save_period(step) == 5
    (step / "config.yaml").write_text("checkpointing: {save_period: true}\n")
    assert config_save_period(step) is None
    fs = file_side([tmp_path / "ck"], tmp_path / "ck")
    assert fs.kept_steps == (10,) and len(fs.saves) == 1


@pytest.mark.parametrize(
    ("command", "period"),
    [
        (["python", "run_grpo.py", "checkpointing.save_period=20"], 20),
        (["python", "run_grpo.py", "++checkpointing.save_period=7"], 7),
        ("uv run run_grpo.py checkpointing.save_period=15 grpo.max_num_steps=100", 15),
        (["python", "run_grpo.py", "checkpointing.save_period_s=20"], None),
        (["python", "run_grpo.py"], None),
    ],
)
def test_the_period_the_command_sets(command: list[str] | str, period: int | None) -> None:
    assert command_period(spec(command)) == period


def store(*, previous: int | None = None, person: bool = False, failures: int = 4) -> StoreSide:
    marks = (tuple((s, 10.0 * s) for s in range(1, 30)),)  # 10 s a step
    return StoreSide(marks, Exposure(failures, failures * 3.1 * 3600), None, 1, previous, person)


def files(
    kept: tuple[int, ...] = (), saves: tuple[float, ...] = (60.0,), config: int | None = 10
) -> FileSide:
    return FileSide(saves, kept, config)


def test_the_period_in_use_is_the_one_passed_last_then_the_commands_then_the_checkpoints() -> None:
    s = spec(["t", "checkpointing.save_period=20"])
    assert period_in_use(s, store(previous=5), files()) == 5
    assert period_in_use(s, store(), files()) == 20
    assert period_in_use(spec(["t"]), store(), files(config=10)) == 10
    assert period_in_use(spec(["t"]), store(), files(config=None)) is None
    # After a person's --set, the command (which holds their value) is what runs.
    assert period_in_use(s, store(previous=5, person=True), files()) == 20


def test_the_next_attempt_gets_young_dalys_period_when_nothing_kept_stands_in_its_way() -> None:
    period, why = next_save_period(spec(["t"]), store(), files(kept=()))
    assert period == 116 and "Young/Daly" in why


def test_the_next_attempt_gets_a_period_that_keeps_every_kept_step() -> None:
    period, why = next_save_period(spec(["t"]), store(), files(kept=(10, 20, 30)))
    assert period == 10 and "step_10" in why


def test_a_persons_setting_of_the_key_wins() -> None:
    assert next_save_period(spec(["t"]), store(previous=20, person=True), files())[0] is None


def test_unmeasured_or_switched_off_the_period_passed_last_stays() -> None:
    assert next_save_period(spec(["t"]), store(previous=20), files(saves=()))[0] == 20
    assert next_save_period(spec(["t"]), store(previous=20, failures=1), files())[0] == 20
    assert next_save_period(spec(["t"], tune=False), store(previous=20), files())[0] == 20
    assert next_save_period(spec(["t"], tune=False), store(), files())[0] is None
    assert next_save_period(spec(["t"]), store(failures=0), files())[0] is None
