"""GPU benchmark of the trainer: step time and generated tokens/s, written to bench/results/.

    python bench/trainer_gpu.py [--steps 30] [--model tiny|tiny-llama|/path/to/local/hf/model]

Runs the real trainer (torch backend, cluster.ray=false: ray and vllm are not installed on the GPU
machines) and reads its metrics.jsonl. Without CUDA it prints a JSON line saying it was skipped and
exits 0: it never records numbers it did not measure.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--model", default="tiny")
    ap.add_argument("--prompts", type=int, default=64)
    ap.add_argument("--generations", type=int, default=16)
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "trainer_gpu.json"))
    args = ap.parse_args()

    import torch

    if not torch.cuda.is_available():
        print(json.dumps({"bench": "trainer_gpu", "skipped": True, "reason": "CUDA not available"}))
        return 0

    with tempfile.TemporaryDirectory(prefix="trainer-gpu-bench-") as tmp:
        overrides = [
            f"grpo.max_num_steps={args.steps}",
            f"grpo.num_prompts_per_step={args.prompts}",
            f"grpo.num_generations_per_prompt={args.generations}",
            "grpo.val_period=10",
            "cluster.ray=false",
            "cluster.device=cuda",
            "cluster.gpus_per_node=1",
            "cluster.torch_threads=4",
            f"policy.model_name={args.model}",
            f"checkpointing.checkpoint_dir={tmp}/ckpt",
            "checkpointing.save_period=1000",
            f"logger.log_dir={tmp}/logs",
        ]
        if args.model in ("tiny", "tiny-llama"):
            overrides += ["policy.tiny.d_model=256", "policy.tiny.n_layers=4", "policy.tiny.n_heads=8"]
        t0 = time.time()
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "trainer",
                "--config",
                str(REPO / "examples" / "toy-grpo.yaml"),
                *overrides,
            ],
            cwd=REPO,
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        wall = time.time() - t0
        if proc.returncode != 0:
            print(proc.stderr[-4000:], file=sys.stderr)
            print(json.dumps({"bench": "trainer_gpu", "error": f"trainer exited {proc.returncode}"}))
            return 1
        rows = [
            json.loads(x) for x in (Path(tmp) / "logs" / "exp_001" / "metrics.jsonl").read_text().splitlines()
        ]
    steps = [r for r in rows if "timing/train/total_step_time" in r][
        3:
    ]  # skip warm-up (CUDA init, allocator)
    result = {
        "bench": "trainer_gpu",
        "gpu": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "model": args.model,
        "samples_per_step": args.prompts * args.generations,
        "steps_measured": len(steps),
        "step_time_s_median": statistics.median(r["timing/train/total_step_time"] for r in steps),
        "generation_s_median": statistics.median(r["timing/train/generation"] for r in steps),
        "training_s_median": statistics.median(r["timing/train/policy_training"] for r in steps),
        "tokens_per_s_median": statistics.median(r["performance/tokens_per_sec"] for r in steps),
        "final_reward_mean": steps[-1]["train/reward_mean"] if steps else None,
        "wall_s": round(wall, 1),
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
