"""The prompt stream, resumable: its state is checkpointed so a resumed run sees the same prompts."""

from __future__ import annotations

import random
from typing import Any

from trainer.tasks.base import Example, Task


class PromptSource:
    """Yields training prompts; its whole state round-trips through state_dict for exact resume."""

    def __init__(self, task: Task, seed: int) -> None:
        self.task = task
        self.rng = random.Random(seed)
        self.consumed = 0
        self.epoch = 0
        self.pos = 0
        self.dataset = task.train_examples()
        self.order: list[int] = []
        if self.dataset is not None:
            self._reshuffle()

    def _reshuffle(self) -> None:
        assert self.dataset is not None
        self.order = list(range(len(self.dataset)))
        self.rng.shuffle(self.order)
        self.pos = 0

    def next_batch(self, n: int) -> list[Example]:
        out = []
        for _ in range(n):
            if self.dataset is None:
                out.append(self.task.sample(self.rng))
            else:
                if self.pos >= len(self.order):
                    self.epoch += 1
                    self._reshuffle()
                out.append(self.dataset[self.order[self.pos]])
                self.pos += 1
        self.consumed += n
        return out

    def state_dict(self) -> dict[str, Any]:
        return {
            "rng": self.rng.getstate(),
            "consumed": self.consumed,
            "epoch": self.epoch,
            "pos": self.pos,
            "order": list(self.order),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.rng.setstate(state["rng"])
        self.consumed, self.epoch, self.pos = state["consumed"], state["epoch"], state["pos"]
        self.order = list(state["order"])
