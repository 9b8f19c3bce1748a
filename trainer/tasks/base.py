"""Task definitions and the resumable prompt source."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainer.tasks.rewards import REWARDS
from trainer.tokenizer import PRINTABLE


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


class AddMod10(Task):
    name = "add_mod10"
    alphabet = "0123456789+="
    default_reward = "partial_credit"

    def sample(self, rng: random.Random) -> Example:
        a, b = rng.randrange(10), rng.randrange(10)
        return Example(f"{a}+{b}=", str((a + b) % 10))


class Reverse(Task):
    name = "reverse"
    default_reward = "partial_credit"

    def __init__(self, reward: str | None = None, length: int = 3, letters: str = "abcd") -> None:
        super().__init__(reward)
        self.length, self.letters = length, letters
        self.alphabet = letters + ">"

    def sample(self, rng: random.Random) -> Example:
        s = "".join(rng.choice(self.letters) for _ in range(self.length))
        return Example(s + ">", s[::-1])


def _read_jsonl(path: str) -> list[Example]:
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
        self.train = _read_jsonl(train_path)
        self.val = _read_jsonl(val_path) if val_path else self.train
        self.alphabet = "".join(sorted({c for e in self.train + self.val for c in e.prompt + e.answer}))

    def train_examples(self) -> list[Example] | None:
        return self.train

    def validation_set(self, n: int, seed: int) -> list[Example]:
        return self.val[:n]


def build_task(data_cfg: Any) -> Task:
    if data_cfg.task == "add_mod10":
        return AddMod10(data_cfg.reward)
    if data_cfg.task == "reverse":
        return Reverse(data_cfg.reward, data_cfg.reverse_len, data_cfg.reverse_alphabet)
    return JsonlTask(data_cfg.train_jsonl_fpath, data_cfg.validation_jsonl_fpath, data_cfg.reward)


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
