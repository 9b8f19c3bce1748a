"""Tasks with verifiable rewards, one module per kind, found by their `data.task` name in `TASKS`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from trainer.tasks.arithmetic import AddMod10
from trainer.tasks.base import Example, Task
from trainer.tasks.jsonl import JsonlTask
from trainer.tasks.prompts import PromptSource
from trainer.tasks.reverse import Reverse
from trainer.tasks.rewards import REWARDS, exact_match, partial_credit

if TYPE_CHECKING:
    from trainer.config import DataConfig

# `data.task` -> its class; the config's list of choices must name exactly these (tested).
TASKS: dict[str, type[Task]] = {cls.name: cls for cls in (AddMod10, Reverse, JsonlTask)}


def build_task(data_cfg: DataConfig) -> Task:
    try:
        kind = TASKS[data_cfg.task]
    except KeyError:
        raise ValueError(f"data.task: unknown task {data_cfg.task!r} (known: {', '.join(TASKS)})") from None
    return kind.from_config(data_cfg)


__all__ = [
    "REWARDS",
    "TASKS",
    "AddMod10",
    "Example",
    "JsonlTask",
    "PromptSource",
    "Reverse",
    "Task",
    "build_task",
    "exact_match",
    "partial_credit",
]
