"""Tasks read from JSONL files, so a run can train on real prompts and answers instead of generated ones."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Self

from trainer.tasks.base import Example, Task

if TYPE_CHECKING:
    from trainer.config import DataConfig


def read_jsonl(path: str) -> list[Example]:
    """Rows with 'prompt' (or 'input') and 'answer' (or 'output'); a bad row names its path:line."""
    out = []
    for n, line in enumerate(Path(path).read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            prompt = row.get("prompt", row.get("input"))
            answer = row.get("answer", row.get("output", row.get("expected_answer")))
            if not isinstance(prompt, str) or answer is None:
                raise ValueError("needs 'prompt' (or 'input') and 'answer' (or 'output')")
        except (ValueError, AttributeError) as e:
            raise ValueError(f"{path}:{n}: bad JSONL row: {e}") from None
        out.append(Example(prompt, str(answer)))
    if not out:
        raise ValueError(f"{path}: no examples")
    return out


class JsonlTask(Task):
    name = "jsonl"

    def __init__(self, train_path: str, val_path: str | None, reward: str | None = None) -> None:
        super().__init__(reward)
        self.train = read_jsonl(train_path)
        self.val = read_jsonl(val_path) if val_path else self.train
        self.alphabet = "".join(sorted({c for e in self.train + self.val for c in e.prompt + e.answer}))

    @classmethod
    def from_config(cls, data_cfg: DataConfig) -> Self:
        if data_cfg.train_jsonl_fpath is None:  # config validation already refuses this
            raise ValueError("data.train_jsonl_fpath: required when data.task is 'jsonl'")
        return cls(data_cfg.train_jsonl_fpath, data_cfg.validation_jsonl_fpath, data_cfg.reward)

    def train_examples(self) -> list[Example] | None:
        return self.train

    def validation_set(self, n: int, seed: int) -> list[Example]:
        return self.val[:n]
