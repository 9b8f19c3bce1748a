"""The generation interface every backend implements.

Why per-sample seeds: sample i of step s draws from seed f(run seed, s, i), so results do not
depend on batching, chunking or how many rollout workers there are, and resuming needs no
sampler state beyond the step number.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import torch


@dataclass
class GenerationResult:
    tokens: list[list[int]]  # generated ids per sample, ending with eos when it was produced
    logprobs: list[list[float]]  # the sampler's log-prob of each generated token


def sample_seed(run_seed: int, step: int, index: int) -> int:
    """A distinct 63-bit seed per (run, step, sample); step 0 is reserved for validation."""
    return ((run_seed * 1_000_003 + step) * 1_048_576 + index) % (2**63 - 1)


class GenerationBackend(ABC):
    @abstractmethod
    def generate(
        self, prompts: list[list[int]], seeds: list[int], max_new_tokens: int, greedy: bool = False
    ) -> GenerationResult: ...

    @abstractmethod
    def update_weights(self, state: dict[str, torch.Tensor]) -> None: ...

    def sleep(self) -> None:  # noqa: B027 - optional hook, no-op by default
        """Release accelerator memory between rollouts (colocated training)."""

    def wake(self) -> None:  # noqa: B027
        """Undo sleep()."""

    def shutdown(self) -> None:  # noqa: B027
        """Free everything; the backend is unusable afterwards."""
