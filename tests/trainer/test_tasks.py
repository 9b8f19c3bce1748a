"""trainer/tasks: the registry, each task kind, the resumable prompt source and the pure rewards."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from trainer import config
from trainer.config import load_config
from trainer.tasks import TASKS, AddMod10, PromptSource, Reverse, build_task, exact_match, partial_credit


def test_the_registry_knows_exactly_the_config_choices() -> None:
    assert set(TASKS) == set(config._CHOICES["data.task"])
    for name, kind in TASKS.items():
        assert kind.name == name


@pytest.mark.parametrize("name", ["add_mod10", "reverse"])
def test_build_task_picks_the_kind_and_the_reward_from_the_config(name: str) -> None:
    task = build_task(load_config(None, [f"data.task={name}"]).data)
    assert type(task) is TASKS[name] and task.reward_name == "partial_credit"
    exact = build_task(load_config(None, [f"data.task={name}", "data.reward=exact_match"]).data)
    assert exact.reward("x", "x") == 1.0 and exact.reward("xy", "xz") == 0.0


def test_add_mod10_answers_are_the_sum_mod_10() -> None:
    rng = random.Random(0)
    for _ in range(20):
        e = AddMod10().sample(rng)
        a, b = int(e.prompt[0]), int(e.prompt[2])
        assert e.prompt == f"{a}+{b}=" and e.answer == str((a + b) % 10)


def test_reverse_uses_the_configured_length_and_letters() -> None:
    task = build_task(
        load_config(None, ["data.task=reverse", "data.reverse_len=5", "data.reverse_alphabet=xy"]).data
    )
    assert isinstance(task, Reverse) and task.alphabet == "xy>"
    e = task.sample(random.Random(1))
    assert len(e.answer) == 5 and set(e.answer) <= {"x", "y"} and e.prompt == e.answer[::-1] + ">"


def test_validation_sets_are_seeded() -> None:
    task = Reverse()
    assert task.validation_set(8, 3) == task.validation_set(8, 3)


def test_rewards() -> None:
    assert exact_match(" cba", "cba") == 1.0
    assert exact_match("cb", "cba") == 0.0
    assert partial_credit("cbx", "cba") == pytest.approx(2 / 3)
    assert partial_credit("7x", "7") == pytest.approx(0.5)


def test_prompt_source_state_round_trips(tmp_path: Path) -> None:
    cfg = load_config(None, ["data.task=reverse"])
    task = build_task(cfg.data)
    a = PromptSource(task, 1)
    a.next_batch(5)
    state = a.state_dict()
    b = PromptSource(task, 999)
    b.load_state_dict(state)
    assert a.next_batch(4) == b.next_batch(4)


def test_jsonl_task_reads_prompts_and_answers(tmp_path: Path) -> None:
    f = tmp_path / "train.jsonl"
    f.write_text('{"prompt": "2+2=", "answer": "4"}\n{"input": "1+1=", "output": 2}\n')
    cfg = load_config(None, ["data.task=jsonl", f"data.train_jsonl_fpath={f}"])
    task = build_task(cfg.data)
    src = PromptSource(task, 0)
    got = {e.prompt: e.answer for e in src.next_batch(4)}
    assert got == {"2+2=": "4", "1+1=": "2"}
    assert src.epoch == 1


def test_jsonl_errors_name_the_file_and_line(tmp_path: Path) -> None:
    f = tmp_path / "bad.jsonl"
    f.write_text('{"prompt": "a", "answer": "b"}\n{"prompt": 3}\n')
    with pytest.raises(ValueError, match=r"bad\.jsonl:2: bad JSONL row"):
        build_task(load_config(None, ["data.task=jsonl", f"data.train_jsonl_fpath={f}"]).data)
