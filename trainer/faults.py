"""Fault injection: real failures with their real error text, for the daemon's tests and the demo.

Faults are off by default. With `fault.only_first_attempt` (default) a fault fires only when this
is the first attempt: `SHEPHERD_ATTEMPT` (set by the daemon, 1-based) is unset or 1, AND the run
did not start from a checkpoint. Either signal alone marks a retry, so a resumed run succeeds
even when launched by hand without the daemon's environment.

The driver holds one `FaultPlan` and calls `faults.at(step, phase)` at each point a fault can
strike, so the training loop reads the same with faults on or off.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, NoReturn

import structlog
import torch

if TYPE_CHECKING:
    from trainer.config import FaultConfig

log = structlog.get_logger(__name__)

KINDS = (
    "none",
    "cuda_oom",
    "run_config_missing",
    "nccl_timeout",
    "hang",
    "signal",
    "kill_in_checkpoint",
    "nan",
    "reward_collapse",
    "kl_blowup",
)
RAISING = ("cuda_oom", "run_config_missing", "nccl_timeout")
# Faults that keep the run going but stop it learning, each by a real mechanism: a NaN loss poisons the
# weights through the optimizer (every later step is NaN too), a broken verifier scores every sample 0 from
# its step on, a broken refit hands the rollout workers perturbed weights from its step on.
TRAINING_HEALTH = ("nan", "reward_collapse", "kl_blowup")
PERSISTENT = ("reward_collapse", "kl_blowup")  # due at their step and at every step after it

# Where in a run a fault can strike, in the order the driver passes them:
#   startup     before any worker exists (only a raising fault at fault.at_step=0)
#   step        the start of a step, before its rollouts (signal)
#   rollout     inside the rollout workers' generate (hang)
#   reward      the rewards of a step's samples (reward_collapse)
#   train       inside the policy workers' train_step (the raising faults, nan)
#   sync        the weights handed to the rollout workers after the update (kl_blowup)
#   checkpoint  a save's files written into tmp_step_N, not yet renamed (kill_in_checkpoint)
Phase = Literal["startup", "step", "rollout", "reward", "train", "sync", "checkpoint"]
PHASES: tuple[Phase, ...] = ("startup", "step", "rollout", "reward", "train", "sync", "checkpoint")
# Phases whose fault someone else acts out: `FaultPlan.at` hands the kind back for the driver to apply (to
# the rewards, the synced weights) or to pass on to the worker that fails.
HANDED_BACK: tuple[Phase, ...] = ("rollout", "reward", "train", "sync")
_PHASE_OF_KIND: dict[str, Phase] = {
    "cuda_oom": "train",
    "run_config_missing": "train",
    "nccl_timeout": "train",
    "hang": "rollout",
    "signal": "step",
    "kill_in_checkpoint": "checkpoint",
    "nan": "train",
    "reward_collapse": "reward",
    "kl_blowup": "sync",
}


@dataclass(frozen=True, slots=True)
class Fault:
    """One planned failure: what, at which step, at which phase of it (`signal` for kind=signal)."""

    kind: str
    step: int
    phase: Phase
    signal: str = "SIGKILL"


_HEALTH_FAULTS = {
    "nan": "this step's advantages are NaN (a bad batch); the optimizer will write NaN into every weight",
    "reward_collapse": "the reward function scores every sample 0 from here on (a broken verifier)",
    "kl_blowup": "the rollout workers get perturbed weights from here on (a broken refit)",
}


def poison(t: torch.Tensor) -> torch.Tensor:
    """The `nan` fault: NaN advantages, as a bad batch (a 0/0 normalisation) makes them; the loss and every
    gradient follow."""
    return t * torch.tensor(float("nan"), dtype=t.dtype, device=t.device)


def perturb_weights(state: dict[str, torch.Tensor], seed: int) -> dict[str, torch.Tensor]:
    """The `kl_blowup` fault: every float weight plus noise of 4x its own scale, as a refit that mixed up or
    half-copied tensors would leave the generation engine; sampling then disagrees with training."""
    gen = torch.Generator().manual_seed(seed)
    out = {}
    for name, t in state.items():
        if t.is_floating_point():
            cpu = t.detach().to("cpu", torch.float32)
            scale = float(cpu.std()) if cpu.numel() > 1 else 1.0
            noise = torch.randn(cpu.shape, generator=gen) * (scale or 1.0) * 4
            out[name] = (cpu + noise).to(t.dtype).to(t.device)
        else:
            out[name] = t
    return out


def phase_of(kind: str, at_step: int) -> Phase:
    """Where `kind` strikes; a raising fault at step 0 strikes at startup, before the workers."""
    if kind in RAISING and at_step == 0:
        return "startup"
    return _PHASE_OF_KIND[kind]


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


def act_out(fault: Fault) -> None:
    """Make a driver-side fault happen in this process; returns only for a graceful signal."""
    if fault.phase == "startup":
        raise_fault(fault.kind, rank=1)
    if fault.phase == "step":
        log.warning("fault injection: signal", signal=fault.signal, step=fault.step)
        if fault.signal in ("SIGTERM", "SIGUSR1"):
            os.kill(os.getpid(), getattr(signal, fault.signal))  # the graceful-stop path, exit 75
            return
        die_by_signal(fault.signal)
    if fault.phase == "checkpoint":
        log.warning("fault injection: killing the trainer in the middle of a checkpoint", step=fault.step)
        die_by_signal("SIGKILL")
    raise ValueError(f"fault {fault.kind!r} at {fault.phase!r} is acted out by a worker, not the driver")


class FaultPlan:
    """At most one armed fault, fired once at its step and phase (a persistent one at every step from it).

    `at(step, phase)` is the one hook the driver calls at every point a fault can strike. A
    driver-side fault is acted out right there (raise, kill, signal); a handed-back one (`hang`,
    the raising faults and `nan` in `train`, `reward_collapse`, `kl_blowup`) is returned so the driver
    applies it or hands it to the worker that fails.
    """

    def __init__(self, fault: Fault | None, act: Callable[[Fault], None] = act_out) -> None:
        self.fault = fault
        self.fired = False
        self._act = act

    @classmethod
    def from_config(
        cls,
        cfg: FaultConfig,
        *,
        resumed: bool,
        env: Mapping[str, str],
        act: Callable[[Fault], None] = act_out,
    ) -> FaultPlan:
        if not fault_armed(cfg.kind, cfg.only_first_attempt, resumed, env):
            return cls(None, act)
        return cls(Fault(cfg.kind, cfg.at_step, phase_of(cfg.kind, cfg.at_step), cfg.signal), act)

    @property
    def kind(self) -> str:
        """The armed fault's kind, or "none" (what the run-starting log line shows)."""
        return "none" if self.fault is None else self.fault.kind

    def disarm(self) -> None:
        """Fire nothing more: a graceful stop's checkpoint must land, so it is never a fault point."""
        self.fault = None

    def at(self, step: int, phase: Phase) -> str | None:
        """The fault due at this step and phase (acted out here if driver-side), else None."""
        f = self.fault
        if f is None or f.phase != phase:
            return None
        due = step >= f.step if f.kind in PERSISTENT else (step == f.step and not self.fired)
        if not due:
            return None
        if not self.fired:
            self.fired = True
            if f.kind in TRAINING_HEALTH:
                log.warning("fault injection", fault=f.kind, step=step, what=_HEALTH_FAULTS[f.kind])
        if phase not in HANDED_BACK:
            self._act(f)
        return f.kind
