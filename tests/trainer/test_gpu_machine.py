"""The trainer on a machine like the lent GPU ones (torch and transformers, no ray, vllm or tensorboard), and
the arithmetic bench/trainer_gpu.py and bench/trainer_gpu_checks.py report from there."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.trainer.conftest import REPO, read_metrics, tiny_overrides
from trainer.config import load_config, missing_packages


def _bench(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, REPO / "bench" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


trainer_gpu = _bench("trainer_gpu")
checks = _bench("trainer_gpu_checks")


def run_without(hidden: tuple[str, ...], args: list[str]) -> subprocess.CompletedProcess[str]:
    """`python -m trainer ARGS` in a Python where the `hidden` packages cannot be imported."""
    code = (
        "import runpy, sys\n"
        f"for name in {hidden!r}:\n"
        "    sys.modules[name] = None  # import raises ModuleNotFoundError, find_spec says None\n"
        f"sys.argv = ['trainer', *{args!r}]\n"
        "runpy.run_module('trainer', run_name='__main__', alter_sys=True)\n"
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180, cwd=REPO)


# -- the trainer where packages are missing ----------------------------------------------------------------
def test_missing_packages_names_the_key_that_needs_each_one() -> None:
    cfg = load_config(
        None, ["cluster.ray=true", "policy.generation.backend=vllm", "policy.model_name=tiny-llama"]
    )
    problems = missing_packages(cfg, lambda name: False)
    assert [p.split(":")[0] for p in problems] == ["cluster.ray", "policy.generation.backend"]
    assert "cluster.ray=false" in problems[0] and "backend=torch" in problems[1]
    assert missing_packages(cfg, lambda name: True) == []
    one_process = load_config(None, ["cluster.ray=false"])  # the GPU machines' way: torch backend, no Ray
    assert missing_packages(one_process, lambda name: False) == []


def test_ray_asked_for_but_absent_is_a_config_error_not_a_traceback(tmp_path: Path) -> None:
    r = run_without(("ray",), tiny_overrides(tmp_path, cluster__ray=True))
    assert r.returncode == 2, r.stderr[-3000:]
    assert "config error: cluster.ray: true needs the 'ray' package" in r.stderr
    assert "Traceback" not in r.stderr
    assert not (tmp_path / "logs").exists()  # refused before anything started


def test_without_tensorboard_the_run_finishes_and_metrics_jsonl_holds_every_step(tmp_path: Path) -> None:
    r = run_without(("tensorboard", "ray", "vllm"), tiny_overrides(tmp_path, grpo__max_num_steps=3))
    assert r.returncode == 0, r.stderr[-3000:]
    assert "TensorBoard writer off: tensorboard is not installed" in r.stderr
    assert not (tmp_path / "logs" / "exp_001" / "tensorboard").exists()
    rows = [row for row in read_metrics(tmp_path) if "train/loss" in row]
    assert [row["step"] for row in rows] == [1, 2, 3]
    for row in rows:
        # what bench/trainer_gpu.py reads: the update covers the prompts too, so it sees more tokens
        assert row["performance/training_tokens"] > row["performance/generated_tokens"] > 0
        assert row["performance/generation_tokens_per_sec"] > 0
        assert row["performance/training_tokens_per_sec"] > 0
        assert "performance/peak_gpu_memory_gib" not in row  # CPU: no GPU memory to report


def test_deterministic_kernels_set_what_cuda_needs_before_the_first_matmul() -> None:
    code = (
        "import os, torch\n"
        "from trainer.workers import rng\n"
        "rng.deterministic_kernels(False)\n"
        "before = (torch.are_deterministic_algorithms_enabled(), os.environ.get('CUBLAS_WORKSPACE_CONFIG'))\n"
        "rng.deterministic_kernels(True)\n"
        "print(before, torch.are_deterministic_algorithms_enabled(),"
        " torch.is_deterministic_algorithms_warn_only_enabled(), os.environ['CUBLAS_WORKSPACE_CONFIG'],"
        " torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark)\n"
        "b = torch.backends.cuda\n"
        "print(b.math_sdp_enabled(), b.flash_sdp_enabled(), b.mem_efficient_sdp_enabled(),"
        " b.cudnn_sdp_enabled())\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "CUBLAS_WORKSPACE_CONFIG"}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, env=env)
    assert r.returncode == 0, r.stderr
    first, attention = r.stdout.splitlines()
    assert first.split() == ["(False,", "None)", "True", "True", ":4096:8", "True", "False"]
    # attention on SDPA's math kernel only: the fused backward passes are not deterministic on CUDA
    assert attention.split() == ["True", "False", "False", "False"]


# -- bench/trainer_gpu.py --------------------------------------------------------------------------------
@pytest.mark.skipif(
    importlib.util.find_spec("torch") is not None and __import__("torch").cuda.is_available(),
    reason="this machine has CUDA: the benchmark would run",
)
def test_the_benchmark_without_cuda_says_skipped_and_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "trainer_gpu.json"
    r = subprocess.run(
        [sys.executable, str(REPO / "bench" / "trainer_gpu.py"), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert json.loads(r.stdout.strip().splitlines()[-1]) == {
        "bench": "trainer_gpu",
        "skipped": True,
        "reason": "CUDA not available",
    }
    assert not out.exists()


def test_peak_flops_are_the_dense_datasheet_figures_of_the_named_device() -> None:
    assert trainer_gpu.peak_flops("NVIDIA H100 80GB HBM3", "bfloat16") == 989.4e12
    assert trainer_gpu.peak_flops("NVIDIA H200", "bfloat16") == 989.4e12
    assert trainer_gpu.peak_flops("NVIDIA H100 PCIe", "bfloat16") == 756.0e12  # not the SXM figure
    assert trainer_gpu.peak_flops("NVIDIA H100 80GB HBM3", "float32") == 66.9e12
    assert trainer_gpu.peak_flops("Some Future GPU", "bfloat16") is None


def test_mfu_is_six_n_per_trained_token_plus_two_n_per_generated_token_over_the_peak() -> None:
    flops = trainer_gpu.model_flops(params=1_000_000, training_tokens=1000, generated_tokens=500)
    assert flops == 6 * 1e6 * 1000 + 2 * 1e6 * 500 == 7e9
    assert trainer_gpu.mfu(7e9, seconds=0.5, peak=1.4e11) == pytest.approx(0.1)
    assert trainer_gpu.mfu(7e9, seconds=0.5, peak=None) is None  # unknown device: no made-up figure
    assert trainer_gpu.mfu(7e9, seconds=0.0, peak=1e12) is None


def _step(step: int, seconds: float, **extra: Any) -> dict[str, Any]:
    return {
        "step": step,
        "train/reward_mean": 0.1 * step,
        "timing/train/total_step_time": seconds,
        "timing/train/generation": seconds / 2,
        "timing/train/policy_training": seconds / 4,
        "timing/train/weight_sync": seconds / 4,
        "performance/generated_tokens": 400.0,
        "performance/training_tokens": 1000.0,
        "performance/generation_tokens_per_sec": 400.0 / (seconds / 2),
        "performance/training_tokens_per_sec": 1000.0 / (seconds / 4),
        **extra,
    }


def test_summary_skips_warm_up_takes_medians_and_the_largest_memory_peak() -> None:
    rows = [{"step": 0, "val/accuracy": 0.0}]
    rows += [_step(s, 100.0) for s in (1, 2, 3)]  # warm-up: CUDA init, allocator growth
    rows += [_step(s, 2.0, **{"performance/peak_gpu_memory_gib": 1.0 + s}) for s in (4, 5, 6, 7)]
    rows += [_step(8, 4.0, **{"performance/peak_gpu_memory_gib": 3.0})]
    s = trainer_gpu.summarise(rows, params=1_000_000, device_name="NVIDIA H200")
    assert s["steps_measured"] == 5
    assert s["step_time_s_median"] == 2.0 and s["training_s_median"] == 0.5
    assert s["training_tokens_per_s_median"] == 2000.0
    assert s["peak_gpu_memory_gib"] == 8.0
    assert s["mfu_step"] == pytest.approx((6e6 * 1000 + 2e6 * 400) / 2.0 / 989.4e12)
    assert s["mfu_training"] == pytest.approx(6e6 * 1000 / 0.5 / 989.4e12)
    assert s["mfu_generation"] == pytest.approx(2e6 * 400 / 1.0 / 66.9e12)  # generation runs in fp32


# -- bench/trainer_gpu_checks.py -------------------------------------------------------------------------
def test_reward_margin_is_last_ten_minus_first_ten() -> None:
    rows = [{"step": 0, "val/accuracy": 0.0}] + [
        {"step": s, "train/reward_mean": 0.0 if s <= 10 else 1.0} for s in range(1, 26)
    ]
    m = checks.reward_margin(rows)
    assert (m["first_mean"], m["last_mean"], m["margin"], m["steps"]) == (0.0, 1.0, 1.0, 25.0)
    with pytest.raises(ValueError, match="at least 20"):
        checks.reward_margin(rows[:15])


def test_metric_drift_ignores_wall_clock_and_finds_the_first_and_largest_difference() -> None:
    a = [
        {"step": s, "time": s, "timing/train/generation": 0.1, "train/loss": 0.5, "train/kl": 0.0}
        for s in range(4)
    ]
    b = [dict(r, time=99.0, **{"timing/train/generation": 7.0}) for r in a]
    assert checks.metric_drift(a, b) == {
        "exact": True,
        "values_compared": 8,
        "first_differing_step": None,
        "max_abs_diff": 0.0,
        "max_abs_diff_at": None,
    }
    b[2]["train/loss"], b[3]["train/loss"] = 0.5 + 1e-7, 0.5 - 1e-3
    d = checks.metric_drift(a, b)
    assert not d["exact"] and d["first_differing_step"] == 2
    assert d["max_abs_diff"] == pytest.approx(1e-3) and d["max_abs_diff_at"] == "train/loss@3"
    b[3]["train/kl"] = math.nan
    assert checks.metric_drift(a, b)["max_abs_diff"] == math.inf  # a NaN on one side is the largest gap
    assert checks.metric_drift(a, b[:3])["exact"] is False  # a step missing is never exact
