"""Arithmetic tasks: the smallest prompts with one checkable answer, for the fastest demo runs."""

from __future__ import annotations

import random

from trainer.tasks.base import Example, Task


class AddMod10(Task):
    name = "add_mod10"
    alphabet = "0123456789+="
    default_reward = "partial_credit"

    def sample(self, rng: random.Random) -> Example:
        a, b = rng.randrange(10), rng.randrange(10)
        return Example(f"{a}+{b}=", str((a + b) % 10))
