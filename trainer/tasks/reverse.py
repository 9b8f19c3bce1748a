"""String reversal: a task a random tiny model learns in a minute on CPU, which the learning test needs."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Self

from trainer.tasks.base import Example, Task

if TYPE_CHECKING:
    from trainer.config import DataConfig


class Reverse(Task):
    name = "reverse"
    default_reward = "partial_credit"

    def __init__(self, reward: str | None = None, length: int = 3, letters: str = "abcd") -> None:
        super().__init__(reward)
        self.length, self.letters = length, letters
        self.alphabet = letters + ">"

    @classmethod
    def from_config(cls, data_cfg: DataConfig) -> Self:
        return cls(data_cfg.reward, data_cfg.reverse_len, data_cfg.reverse_alphabet)

    def sample(self, rng: random.Random) -> Example:
        s = "".join(rng.choice(self.letters) for _ in range(self.length))
        return Example(s + ">", s[::-1])
