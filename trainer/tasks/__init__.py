"""Tasks with verifiable rewards: seeded toy tasks and JSONL datasets."""

from trainer.tasks.base import Example, PromptSource, Task, build_task
from trainer.tasks.rewards import exact_match, partial_credit

__all__ = ["Example", "PromptSource", "Task", "build_task", "exact_match", "partial_credit"]
