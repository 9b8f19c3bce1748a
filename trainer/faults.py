"""Fault injection: real failures with their real error text, for the daemon's tests and the demo.

Faults are off by default. With `fault.only_first_attempt` (default) a fault fires only when this
is the first attempt: `SHEPHERD_ATTEMPT` (set by the daemon, 1-based) is unset or 1, AND the run
did not start from a checkpoint. Either signal alone marks a retry, so a resumed run succeeds
even when launched by hand without the daemon's environment.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Mapping
from typing import NoReturn

import torch

KINDS = ("none", "cuda_oom", "run_config_missing", "nccl_timeout", "hang", "signal", "kill_in_checkpoint")
RAISING = ("cuda_oom", "run_config_missing", "nccl_timeout")


def attempt_from_env(env: Mapping[str, str]) -> int:
    try:
        return max(1, int(env.get("SHEPHERD_ATTEMPT", "1")))
    except ValueError:
        return 1


def fault_armed(kind: str, only_first_attempt: bool, resumed: bool, env: Mapping[str, str]) -> bool:
    if kind == "none":
        return False
    if not only_first_attempt:
        return True
    return attempt_from_env(env) == 1 and not resumed


def oom_message() -> str:
    return (
        "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB of which "
        "1.06 GiB is free. Including non-PyTorch memory, this process has 78.12 GiB memory in use. Of the "
        "allocated memory 74.50 GiB is allocated by PyTorch, and 2.31 GiB is reserved by PyTorch but "
        "unallocated. "
        "If reserved but unallocated memory is large try setting "
        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "
        "to avoid fragmentation.  See documentation for Memory Management  "
        "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
    )


def run_config_message(rank: int, env: Mapping[str, str]) -> str:
    base = env.get("NRL_MEGATRON_CHECKPOINT_DIR") or os.path.join(
        env.get("HF_HOME") or os.path.expanduser("~/.cache/huggingface"), "nemo_rl"
    )
    path = os.path.join(base, "model_Qwen_Qwen2.5-1.5B", "iter_0000000")
    return (
        f"Pretrained run config not found at {path}/run_config.yaml on rank={rank}. This usually means that "
        "the one-time HF->mcore conversion on rank=0 saved to a directory not being mounted on this node. "
        "Please check that NRL_MEGATRON_CHECKPOINT_DIR (or HF_HOME) points to shared storage visible from "
        "every node."
    )


def nccl_watchdog_text(rank: int, seq: int) -> str:
    return (
        f"[Rank {rank}] Watchdog caught collective operation timeout: "
        f"WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, "
        "NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600000 milliseconds before timing out."
    )


def raise_fault(kind: str, rank: int = 0, step: int = 0, env: Mapping[str, str] | None = None) -> NoReturn:
    env = os.environ if env is None else env
    if kind == "cuda_oom":
        raise torch.OutOfMemoryError(oom_message())
    if kind == "run_config_missing":
        raise FileNotFoundError(run_config_message(max(rank, 1), env))
    if kind == "nccl_timeout":
        seq = 1000 + step
        text = nccl_watchdog_text(rank, seq)
        stamp = time.strftime("%m%d %H:%M:%S")
        print(
            f"[rank{rank}]:[E{stamp}.000000 {os.getpid()} ProcessGroupNCCL.cpp:632] {text}", file=sys.stderr
        )
        print(
            f"[rank{rank}]:[E{stamp}.000000 {os.getpid()} ProcessGroupNCCL.cpp:2201] "
            "[PG ID 0 PG GUID 0(default_pg) "
            f"Rank {rank}] First PG on this rank to signal dumping.",
            file=sys.stderr,
        )
        sys.stderr.flush()
        raise torch.distributed.DistBackendError(text)
    raise ValueError(f"fault.kind {kind!r} does not raise")


def hang_forever() -> NoReturn:
    """A stuck rollout: the process stays alive and prints nothing; only a stall detector can see it."""
    while True:
        time.sleep(3600)


def die_by_signal(name: str) -> NoReturn:
    sys.stdout.flush()
    sys.stderr.flush()
    os.kill(os.getpid(), getattr(signal, name))
    time.sleep(30)  # a catchable signal may need a moment to be delivered
    os._exit(128 + int(getattr(signal, name)))
