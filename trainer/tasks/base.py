"""What every task is (`Example`, `Task`), so the driver never needs to know which kind it runs."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Self

from trainer.tasks.rewards import REWARDS
from trainer.tokenizer import PRINTABLE

if TYPE_CHECKING:
    from trainer.config import DataConfig


@dataclass(frozen=True)
class Example:
    prompt: str
    answer: str


class Task:
    """A prompt generator (or dataset) plus a reward; `alphabet` feeds the char tokenizer."""

    name = "task"
    alphabet = PRINTABLE
    default_reward = "exact_match"

    def __init__(self, reward: str | None = None) -> None:
        self.reward_name = reward or self.default_reward
        self._reward: Callable[[str, str], float] = REWARDS[self.reward_name]

    @classmethod
    def from_config(cls, data_cfg: DataConfig) -> Self:
        """Build the task from the `data.*` config keys; kinds with options override this."""
        return cls(data_cfg.reward)

    def reward(self, response: str, answer: str) -> float:
        return self._reward(response, answer)

    def sample(self, rng: random.Random) -> Example:
        raise NotImplementedError

    def train_examples(self) -> list[Example] | None:
        """A fixed dataset, or None when examples are generated from the RNG."""
        return None

    def validation_set(self, n: int, seed: int) -> list[Example]:
        rng = random.Random(seed + 7919)
        return [self.sample(rng) for _ in range(n)]
