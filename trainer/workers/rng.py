"""Capture and restore every RNG a process owns (python, numpy, torch CPU and CUDA), for exact resume."""

from __future__ import annotations

import os
import random
from typing import Any

import numpy as np
import torch


def capture() -> dict[str, Any]:
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def seed_all(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)


def deterministic_kernels(on: bool) -> None:
    """`cluster.deterministic`: kernels that give the same bits every run, so a resume repeats a straight run.

    Call before the process's first CUDA matmul: cuBLAS reads CUBLAS_WORKSPACE_CONFIG when it creates its
    handle. Attention runs on SDPA's math kernel: the memory-efficient and cuDNN attention backward passes
    are not deterministic (torch warned so for both on an H200). warn_only: any other op with no
    deterministic kernel warns, naming itself, instead of failing the run.
    """
    if not on:
        return
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True
    torch.backends.cuda.enable_flash_sdp(False)
    torch.backends.cuda.enable_mem_efficient_sdp(False)
    torch.backends.cuda.enable_cudnn_sdp(False)
    torch.backends.cuda.enable_math_sdp(True)
