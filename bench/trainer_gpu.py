"""GPU benchmark of the trainer at two model sizes, so its speed on CUDA is a recorded number, not a guess.

    python bench/trainer_gpu.py [--steps 20] [--sizes small,medium] [--out bench/results/trainer_gpu.json]

Runs the real trainer (`python -m trainer`, torch generation backend, cluster.ray=false: ray and vllm are not
installed on the GPU machines) on `examples/toy-grpo.yaml` with a tiny HF Llama built from a config and
policy.precision=bfloat16, and reads its metrics.jsonl. Per size it records step time, generation and training
tokens/s, peak GPU memory (torch.cuda.max_memory_allocated, the trainer's one process) and MFU, with the
device's name and the versions (torch, CUDA, transformers, driver).

MFU = model FLOPs / (seconds x the device's peak dense FLOP/s), model FLOPs = 6 x params x training tokens
+ 2 x params x generated tokens (training tokens: prompt + response tokens of the update, padding excluded).
The torch backend recomputes the whole prefix for every new token, so the compute it actually spends on
generation is larger than 2 x params x generated tokens: MFU counts useful work only. Peaks are NVIDIA's dense
(no sparsity) figures: H100 SXM / H200 989.4 TFLOP/s bf16 and 66.9 TFLOP/s fp32. Training autocasts to
bf16, generation runs in fp32 (the torch backend keeps fp32 weights), so step MFU is over the bf16 peak and
the per-phase MFUs are over their own precision's peak.

Without CUDA it prints a JSON line saying it was skipped and exits 0, writing nothing: it never records
numbers it did not measure.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]

# name -> policy.tiny.* of the tiny-llama (head dim d_model / n_heads = 32 and 64)
SIZES: dict[str, dict[str, int]] = {
    "small": {"d_model": 256, "n_layers": 4, "n_heads": 8},
    "medium": {"d_model": 1024, "n_layers": 8, "n_heads": 16},
}

# NVIDIA datasheet peaks per GPU, dense (no 2:4 sparsity), FLOP/s; fp32 = CUDA cores (PyTorch's default fp32
# matmul uses no TF32). Checked in order: the first key found in the device name wins.
PEAK_FLOPS: list[tuple[str, dict[str, float]]] = [
    ("H100 PCIe", {"bfloat16": 756.0e12, "float32": 51.2e12}),
    ("H100", {"bfloat16": 989.4e12, "float32": 66.9e12}),  # SXM (the 80GB HBM3 part)
    ("H200", {"bfloat16": 989.4e12, "float32": 66.9e12}),  # same compute as H100 SXM, more and faster memory
    ("A100", {"bfloat16": 312.0e12, "float32": 19.5e12}),
]

WARMUP_STEPS = 3  # CUDA context, allocator growth and cuBLAS heuristics land in the first steps


def peak_flops(device_name: str, precision: str) -> float | None:
    """The device's peak dense FLOP/s for `precision` ('bfloat16' | 'float32'), None for an unknown device."""
    for key, peaks in PEAK_FLOPS:
        if key.lower() in device_name.lower():
            return peaks.get(precision)
    return None


def model_flops(params: int, training_tokens: float, generated_tokens: float) -> float:
    """6·N per trained token (forward + backward) plus 2·N per generated token (one forward)."""
    return 6.0 * params * training_tokens + 2.0 * params * generated_tokens


def mfu(flops: float, seconds: float, peak: float | None) -> float | None:
    """Model FLOPs utilisation: achieved FLOP/s over the peak; None without a known peak or a duration."""
    if peak is None or peak <= 0 or seconds <= 0:
        return None
    return flops / seconds / peak


def skipped(reason: str) -> dict[str, Any]:
    return {"bench": "trainer_gpu", "skipped": True, "reason": reason}


def summarise(
    rows: list[dict[str, Any]], params: int, device_name: str, precision: str = "bfloat16"
) -> dict[str, Any]:
    """Medians over the steps after warm-up of one run's metrics.jsonl rows, with the MFU they imply."""
    steps = [r for r in rows if "timing/train/total_step_time" in r][WARMUP_STEPS:]
    if not steps:
        raise ValueError("no training steps after warm-up in metrics.jsonl")

    def med(key: str) -> float:
        return float(statistics.median(float(r[key]) for r in steps))

    step_s, gen_s, train_s = (
        med("timing/train/total_step_time"),
        med("timing/train/generation"),
        med("timing/train/policy_training"),
    )
    gen_tok, train_tok = med("performance/generated_tokens"), med("performance/training_tokens")
    peak_mem = [
        float(r["performance/peak_gpu_memory_gib"]) for r in steps if "performance/peak_gpu_memory_gib" in r
    ]
    step_mfu = mfu(model_flops(params, train_tok, gen_tok), step_s, peak_flops(device_name, precision))
    train_mfu = mfu(model_flops(params, train_tok, 0), train_s, peak_flops(device_name, precision))
    gen_mfu = mfu(model_flops(params, 0, gen_tok), gen_s, peak_flops(device_name, "float32"))
    return {
        "steps_measured": len(steps),
        "step_time_s_median": step_s,
        "generation_s_median": gen_s,
        "training_s_median": train_s,
        "weight_sync_s_median": med("timing/train/weight_sync"),
        "generated_tokens_per_step": gen_tok,
        "training_tokens_per_step": train_tok,
        "generation_tokens_per_s_median": med("performance/generation_tokens_per_sec"),
        "training_tokens_per_s_median": med("performance/training_tokens_per_sec"),
        "peak_gpu_memory_gib": max(peak_mem) if peak_mem else None,
        "mfu_step": step_mfu,
        "mfu_training": train_mfu,
        "mfu_generation": gen_mfu,
        "reward_mean_last": float(steps[-1]["train/reward_mean"]),
    }


def overrides_for(size: str, steps: int, prompts: int, generations: int, tmp: Path) -> list[str]:
    s = SIZES[size]
    return [
        f"grpo.max_num_steps={steps}",
        f"grpo.num_prompts_per_step={prompts}",
        f"grpo.num_generations_per_prompt={generations}",
        "grpo.val_at_start=false",
        f"grpo.val_period={steps}",
        "cluster.ray=false",
        "cluster.device=cuda",
        "cluster.gpus_per_node=1",
        "cluster.torch_threads=4",
        "policy.model_name=tiny-llama",
        "policy.precision=bfloat16",
        f"policy.tiny.d_model={s['d_model']}",
        f"policy.tiny.n_layers={s['n_layers']}",
        f"policy.tiny.n_heads={s['n_heads']}",
        "checkpointing.enabled=false",
        f"checkpointing.checkpoint_dir={tmp}/ckpt",
        f"logger.log_dir={tmp}/logs",
        "logger.tensorboard_enabled=false",
    ]


def count_params(config: Path, overrides: list[str]) -> int:
    """Parameters of the model the trainer builds for this config (built on the meta device: no memory)."""
    import torch

    sys.path.insert(0, str(REPO))
    from trainer.config import load_config
    from trainer.driver import make_tokenizer
    from trainer.models import ModelSpec, build_model
    from trainer.tasks import build_task

    cfg = load_config(config, overrides)
    tok = make_tokenizer(cfg, build_task(cfg.data))
    t = cfg.policy.tiny
    spec = ModelSpec(
        cfg.policy.model_name, tok.vocab_size, t.n_layers, t.d_model, t.n_heads, t.max_seq_len, cfg.grpo.seed
    )
    with torch.device("meta"):
        model = build_model(spec)
    return sum(p.numel() for p in model.parameters())


def versions() -> dict[str, Any]:
    import torch

    out: dict[str, Any] = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
    }
    try:
        import transformers

        out["transformers"] = transformers.__version__
    except ImportError:
        out["transformers"] = None
    try:
        smi = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        out["driver"] = (
            smi.stdout.strip().splitlines()[0] if smi.returncode == 0 and smi.stdout.strip() else None
        )
    except (OSError, subprocess.TimeoutExpired):
        out["driver"] = None
    return out


def run_size(size: str, args: argparse.Namespace, device_name: str) -> dict[str, Any]:
    config = REPO / "examples" / "toy-grpo.yaml"
    with tempfile.TemporaryDirectory(prefix="trainer-gpu-bench-") as tmp:
        overrides = overrides_for(size, args.steps, args.prompts, args.generations, Path(tmp))
        params = count_params(config, overrides)
        t0 = time.time()
        proc = subprocess.run(
            [sys.executable, "-m", "trainer", "--config", str(config), *overrides],
            cwd=REPO,
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            timeout=args.timeout,
        )
        wall = time.time() - t0
        if proc.returncode != 0:
            print(proc.stderr[-4000:], file=sys.stderr)
            return {"size": size, "error": f"trainer exited {proc.returncode}"}
        path = Path(tmp) / "logs" / "exp_001" / "metrics.jsonl"
        rows = [json.loads(x) for x in path.read_text().splitlines()]
    return {
        "size": size,
        "model": "tiny-llama",
        **SIZES[size],
        "params": params,
        "precision": "bfloat16",
        "samples_per_step": args.prompts * args.generations,
        **summarise(rows, params, device_name),
        "wall_s": round(wall, 1),
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--sizes", default=",".join(SIZES))
    ap.add_argument("--prompts", type=int, default=64)
    ap.add_argument("--generations", type=int, default=16)
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "trainer_gpu.json"))
    args = ap.parse_args()

    import torch

    if not torch.cuda.is_available():
        print(json.dumps(skipped("CUDA not available")))
        return 0
    device_name = torch.cuda.get_device_name(0)
    result: dict[str, Any] = {
        "bench": "trainer_gpu",
        "device": device_name,
        **versions(),
        "config": "examples/toy-grpo.yaml, policy.model_name=tiny-llama, cluster.ray=false, torch backend",
        "mfu_formula": "(6*params*train_tokens + 2*params*gen_tokens) / (seconds * peak dense FLOP/s)",
        "peak_flops_bf16": peak_flops(device_name, "bfloat16"),
        "peak_flops_fp32": peak_flops(device_name, "float32"),
        "warmup_steps_skipped": WARMUP_STEPS,
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "sizes": [],
    }
    rc = 0
    for size in args.sizes.split(","):
        one = run_size(size, args, device_name)
        rc |= 1 if "error" in one else 0
        result["sizes"].append(one)
        print(json.dumps(one), flush=True)
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(
            json.dumps(result, indent=2) + "\n"
        )  # after each size: a timeout keeps some
    print(json.dumps({k: v for k, v in result.items() if k != "sizes"}))
    return rc


if __name__ == "__main__":
    sys.exit(main())
