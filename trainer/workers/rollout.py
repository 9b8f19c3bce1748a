"""The rollout worker, so sampling runs apart from training and scales on its own: it owns one backend."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from trainer import faults
from trainer.generation import GenerationResult, make_backend
from trainer.stacks import enable_stack_dump
from trainer.workers import rng
from trainer.workers.policy import pick_device


class RolloutWorker:
    def __init__(
        self,
        backend: str,
        backend_kwargs: dict[str, Any],
        device: str = "auto",
        torch_threads: int = 1,
        seed: int = 0,
        deterministic: bool = False,
    ) -> None:
        enable_stack_dump()  # where this actor is stuck, on SIGUSR2 (Shepherd's forensics)
        torch.set_num_threads(torch_threads)
        rng.deterministic_kernels(deterministic)
        rng.seed_all(seed)
        dev = pick_device(device)
        self.backend = make_backend(backend, device=str(dev), **backend_kwargs)

    def generate(
        self,
        prompts: list[list[int]],
        seeds: list[int],
        max_new_tokens: int,
        greedy: bool = False,
        hang: bool = False,
    ) -> GenerationResult:
        if hang:
            faults.hang_forever()
        return self.backend.generate(prompts, seeds, max_new_tokens, greedy)

    def update_weights(self, state: dict[str, torch.Tensor], perturb_seed: int | None = None) -> bool:
        """Load the policy's weights; `perturb_seed` (the kl_blowup fault) perturbs them first."""
        if perturb_seed is not None:
            state = faults.perturb_weights(state, perturb_seed)
        self.backend.update_weights(state)
        return True

    def sleep(self) -> None:
        self.backend.sleep()

    def wake(self) -> None:
        self.backend.wake()

    def save_rng(self, path: str) -> None:
        torch.save(rng.capture(), path)

    def load_rng(self, path: str) -> None:
        if Path(path).exists():
            rng.restore(torch.load(path, weights_only=False))

    def shutdown(self) -> None:
        self.backend.shutdown()
