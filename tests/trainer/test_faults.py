"""trainer/faults: when a FaultPlan fires (step, phase, once, first attempt only) and the real error texts."""

from __future__ import annotations

import pytest
import torch

from trainer.config import load_config
from trainer.faults import PHASES, Fault, FaultPlan, Phase, attempt_from_env, fault_armed, raise_fault


def _plan(
    kind: str, at_step: int, *, resumed: bool = False, env: dict[str, str] | None = None
) -> tuple[FaultPlan, list[Fault]]:
    acted: list[Fault] = []
    cfg = load_config(None, [f"fault.kind={kind}", f"fault.at_step={at_step}", "fault.signal=SIGUSR1"]).fault
    return FaultPlan.from_config(cfg, resumed=resumed, env=env or {}, act=acted.append), acted


def _walk(plan: FaultPlan, steps: range) -> list[tuple[int, Phase, str]]:
    """Call the hook the way the driver does: startup at step 0, then the other phases of each step."""
    fired = []
    for step in steps:
        for phase in PHASES:
            if (phase == "startup") != (step == 0):
                continue
            kind = plan.at(step, phase)
            if kind is not None:
                fired.append((step, phase, kind))
    return fired


@pytest.mark.parametrize(
    ("kind", "at_step", "phase", "acted_by_driver"),
    [
        ("cuda_oom", 3, "train", False),
        ("run_config_missing", 2, "train", False),
        ("nccl_timeout", 2, "train", False),
        ("run_config_missing", 0, "startup", True),
        ("cuda_oom", 0, "startup", True),
        ("hang", 2, "rollout", False),
        ("signal", 2, "step", True),
        ("kill_in_checkpoint", 4, "checkpoint", True),
    ],
)
def test_each_fault_fires_once_at_its_step_and_phase(
    kind: str, at_step: int, phase: Phase, acted_by_driver: bool
) -> None:
    plan, acted = _plan(kind, at_step)
    assert plan.kind == kind
    assert _walk(plan, range(0, 8)) == [(at_step, phase, kind)]
    assert plan.fired
    # driver-side faults are acted out by the plan; worker-side ones are only handed back
    assert acted == ([Fault(kind, at_step, phase, "SIGUSR1")] if acted_by_driver else [])
    assert _walk(plan, range(0, 8)) == []  # only once, even if the same step came round again


def test_a_fault_at_step_0_only_fires_if_it_can_strike_before_the_workers() -> None:
    for kind in ("hang", "signal", "kill_in_checkpoint"):
        plan, acted = _plan(kind, 0)
        assert _walk(plan, range(0, 8)) == [] and acted == []


def test_no_fault_on_a_retry_or_a_resume_or_when_off() -> None:
    for plan, acted in (
        _plan("cuda_oom", 1, env={"SHEPHERD_ATTEMPT": "2"}),
        _plan("kill_in_checkpoint", 1, resumed=True),
        _plan("none", 1),
    ):
        assert plan.kind == "none"
        assert _walk(plan, range(0, 4)) == [] and acted == []


def test_disarm_stops_a_fault_that_has_not_fired() -> None:
    plan, acted = _plan("kill_in_checkpoint", 2)
    plan.disarm()
    assert plan.kind == "none"
    assert _walk(plan, range(0, 4)) == [] and acted == []


def test_a_startup_fault_raises_the_real_exception() -> None:
    cfg = load_config(None, ["fault.kind=cuda_oom", "fault.at_step=0"]).fault
    plan = FaultPlan.from_config(cfg, resumed=False, env={})
    with pytest.raises(torch.OutOfMemoryError):
        plan.at(0, "startup")


def test_faults_fire_only_on_the_first_attempt_of_a_fresh_run() -> None:
    assert fault_armed("cuda_oom", True, resumed=False, env={})
    assert fault_armed("cuda_oom", True, resumed=False, env={"SHEPHERD_ATTEMPT": "1"})
    assert not fault_armed("cuda_oom", True, resumed=False, env={"SHEPHERD_ATTEMPT": "2"})
    assert not fault_armed("cuda_oom", True, resumed=True, env={})
    assert fault_armed("cuda_oom", False, resumed=True, env={"SHEPHERD_ATTEMPT": "3"})
    assert not fault_armed("none", False, resumed=False, env={})
    assert attempt_from_env({"SHEPHERD_ATTEMPT": "junk"}) == 1


def test_oom_fault_raises_the_real_torch_exception_type() -> None:
    with pytest.raises(torch.OutOfMemoryError, match=r"CUDA out of memory\. Tried to allocate"):
        raise_fault("cuda_oom")
    with pytest.raises(FileNotFoundError, match=r"run_config.yaml on rank=1. This usually means"):
        raise_fault("run_config_missing", rank=1, env={"HF_HOME": "/shared/hf"})


@pytest.mark.parametrize(("kind", "phase"), [("reward_collapse", "reward"), ("kl_blowup", "sync")])
def test_a_persistent_health_fault_is_due_at_its_step_and_every_step_after(kind: str, phase: Phase) -> None:
    plan, acted = _plan(kind, 3)
    assert _walk(plan, range(1, 7)) == [(s, phase, kind) for s in range(3, 7)]
    assert acted == []  # the driver applies it (to the rewards, to the synced weights)


def test_the_nan_fault_is_handed_to_the_policy_workers_once() -> None:
    plan, acted = _plan("nan", 2)
    assert _walk(plan, range(1, 6)) == [(2, "train", "nan")] and acted == []


def test_poisoned_advantages_make_the_loss_and_every_gradient_nan() -> None:
    from trainer.faults import poison

    w = torch.nn.Parameter(torch.ones(3))
    loss = (w * poison(torch.tensor([1.0, -1.0, 0.5]))).sum()
    loss.backward()
    assert bool(torch.isnan(loss)) and w.grad is not None and bool(torch.isnan(w.grad).all())


def test_perturbed_weights_move_every_float_tensor_by_its_own_scale_and_keep_the_rest() -> None:
    from trainer.faults import perturb_weights

    state = {"w": torch.full((64,), 0.5) + torch.linspace(0, 1, 64), "steps": torch.tensor([7])}
    a, b = perturb_weights(state, seed=1), perturb_weights(state, seed=1)
    assert torch.equal(a["w"], b["w"])  # reproducible
    moved = (a["w"] - state["w"]).abs().mean()
    assert 2 * state["w"].std() < moved < 8 * state["w"].std()
    assert torch.equal(a["steps"], state["steps"])
