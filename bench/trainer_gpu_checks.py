"""The trainer's CUDA checks in one script, so one short lease of a GPU machine answers all of issue 32.

    python bench/trainer_gpu_checks.py --device cuda --out DIR
    python bench/trainer_gpu_checks.py --device cpu --only toy --write-baseline  # the CPU margins

Every check runs the real `python -m trainer` (cluster.ray=false, torch generation backend) as a subprocess,
independent runs at once (the GPU machine has 16 cores; the toy models leave the GPU mostly idle):

- toy: examples/toy-grpo.yaml learns: mean train/reward_mean of the last 10 steps minus that of the first 10
  (the margin), compared with the margin the same config (seed 42) shows on CPU, read from the baseline file.
- resume: straight run vs the same run stopped at grpo.stop_at_step and resumed in a new process, and a
  second straight run (run-to-run), each with cluster.deterministic false and true: the largest difference of
  any logged value (wall-clock metrics aside) says whether the resume is exact or how far it drifts.
- bf16: a tiny HF Llama built from a config trains 50 steps with policy.precision=bfloat16, every loss finite.

It writes DIR/checks.json and DIR/checks_logs.txt (each run's stderr tail) and prints one summary line per
check. Nothing here decides on wall-clock times.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
TOY = REPO / "examples" / "toy-grpo.yaml"
BASELINE = REPO / "bench" / "results" / "trainer_gpu_toy_cpu.json"
IGNORED = ("time", "timing/", "performance/")  # wall-clock, as in tests/trainer/test_runs.py
PROBED = (
    "torch",
    "transformers",
    "structlog",
    "yaml",
    "tqdm",
    "numpy",
    "safetensors",
    "tensorboard",
    "ray",
    "vllm",
)


# -- pure functions (tests/trainer/test_bench_trainer_gpu.py) ----------------------------------------------
def reward_margin(rows: list[dict[str, Any]], window: int = 10) -> dict[str, float]:
    """Mean train/reward_mean of the last `window` steps, of the first `window`, and their difference."""
    rewards = [float(r["train/reward_mean"]) for r in rows if "train/reward_mean" in r]
    if len(rewards) < 2 * window:
        raise ValueError(f"need at least {2 * window} training steps, got {len(rewards)}")
    first = sum(rewards[:window]) / window
    last = sum(rewards[-window:]) / window
    return {"first_mean": first, "last_mean": last, "margin": last - first, "steps": float(len(rewards))}


def metric_drift(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> dict[str, Any]:
    """How far two runs' metrics.jsonl rows differ, wall-clock metrics aside: exact, or the largest gap."""
    rows_a = {int(r["step"]): r for r in a}
    rows_b = {int(r["step"]): r for r in b}
    if sorted(rows_a) != sorted(rows_b):
        return {"exact": False, "steps_differ": [sorted(rows_a), sorted(rows_b)]}
    worst, worst_key, first_step, compared = 0.0, None, None, 0
    for step in sorted(rows_a):
        ra, rb = rows_a[step], rows_b[step]
        keys = {k for k in (*ra, *rb) if k != "step" and not k.startswith(IGNORED)}
        for k in sorted(keys):
            compared += 1
            va, vb = ra.get(k), rb.get(k)
            if va == vb:
                continue
            if first_step is None:
                first_step = step
            gap = abs(float(va) - float(vb)) if va is not None and vb is not None else math.inf
            if math.isnan(gap):  # NaN on one side only: as far apart as values get
                gap = math.inf
            if gap > worst:
                worst, worst_key = gap, f"{k}@{step}"
    return {
        "exact": first_step is None,
        "values_compared": compared,
        "first_differing_step": first_step,
        "max_abs_diff": worst,
        "max_abs_diff_at": worst_key,
    }


def probe(names: tuple[str, ...] = PROBED) -> dict[str, str | None]:
    """Each package's version (or 'installed'), None where this Python cannot import it."""
    out: dict[str, str | None] = {}
    for name in names:
        if importlib.util.find_spec(name) is None:
            out[name] = None
            continue
        try:
            mod = __import__(name)
            out[name] = str(getattr(mod, "__version__", "installed"))
        except Exception as e:  # a package that is there but broken is as good as absent; say why
            out[name] = f"broken: {type(e).__name__}: {e}"[:200]
    return out


# -- running the trainer -----------------------------------------------------------------------------------
class Runner:
    def __init__(self, device: str, work: Path, timeout: float) -> None:
        self.device, self.work, self.timeout = device, work, timeout
        self.logs: list[str] = []

    def trainer(self, name: str, overrides: list[str], env: dict[str, str] | None = None) -> int:
        t0 = time.time()
        proc = subprocess.run(
            [sys.executable, "-m", "trainer", "--config", str(TOY), *overrides],
            cwd=REPO,
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
            timeout=self.timeout,
        )
        tail = proc.stderr[-5000:]
        self.logs.append(f"===== {name}: exit {proc.returncode} in {time.time() - t0:.1f} s\n{tail}\n")
        return proc.returncode

    def base(self, tag: str, **extra: Any) -> list[str]:
        d = self.work / tag
        ov = {
            "cluster.ray": "false",
            "cluster.device": self.device,
            "cluster.torch_threads": 1,
            "checkpointing.checkpoint_dir": str(d / "ckpt"),
            "logger.log_dir": str(d / "logs"),
            "logger.status_interval_s": 2,
        }
        ov.update(extra)
        return [f"{k}={v}" for k, v in ov.items()]

    def metrics(self, tag: str) -> list[dict[str, Any]]:
        path = self.work / tag / "logs" / "exp_001" / "metrics.jsonl"
        return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def check_toy(r: Runner, seed: int, steps: int) -> dict[str, Any]:
    tag = f"toy_seed{seed}"
    rc = r.trainer(tag, r.base(tag, **{"grpo.seed": seed, "grpo.max_num_steps": steps}))
    out: dict[str, Any] = {"seed": seed, "exit": rc}
    rows = r.metrics(tag)
    if rc == 0:
        out.update(reward_margin(rows))
        vals = [x["val/accuracy"] for x in rows if "val/accuracy" in x]
        out["val_accuracy_first_last"] = [vals[0], vals[-1]] if vals else None
    return out


MEDIUM = {"policy.tiny.d_model": 1024, "policy.tiny.n_layers": 8, "policy.tiny.n_heads": 16}


def check_resume(
    r: Runner, deterministic: bool, model: str, precision: str, size: dict[str, int] | None = None
) -> dict[str, Any]:
    width = f"_d{size['policy.tiny.d_model']}" if size else ""
    name = f"resume_{model}_{precision}_det{int(deterministic)}{width}"
    common = {
        **(size or {}),
        "grpo.max_num_steps": 8,
        "grpo.val_period": 4,
        "checkpointing.save_period": 4,
        "cluster.deterministic": str(deterministic).lower(),
        "policy.model_name": model,
        "policy.precision": precision,
    }
    out: dict[str, Any] = {"deterministic": deterministic, "model": model, "precision": precision}
    out["straight_exit"] = r.trainer(f"{name}_a", r.base(f"{name}_a", **common))
    out["straight_again_exit"] = r.trainer(f"{name}_b", r.base(f"{name}_b", **common))
    out["stop_exit"] = r.trainer(
        f"{name}_split", r.base(f"{name}_split", **common, **{"grpo.stop_at_step": 4})
    )
    out["resume_exit"] = r.trainer(f"{name}_split_resume", r.base(f"{name}_split", **common))
    a, b, split = r.metrics(f"{name}_a"), r.metrics(f"{name}_b"), r.metrics(f"{name}_split")
    times = sorted(x["timing/train/total_step_time"] for x in a if "timing/train/total_step_time" in x)
    out["straight_step_time_s_median"] = times[len(times) // 2] if times else None
    out["run_to_run"] = metric_drift(a, b)
    out["resume_vs_straight"] = metric_drift(a, split)
    out["ok"] = (
        out["straight_exit"] == 0
        and out["straight_again_exit"] == 0
        and out["stop_exit"] == 75
        and out["resume_exit"] == 0
    )
    return out


def check_bf16(r: Runner, steps: int) -> dict[str, Any]:
    tag = "bf16_tiny_llama"
    rc = r.trainer(
        tag,
        r.base(
            tag,
            **{
                "policy.model_name": "tiny-llama",
                "policy.precision": "bfloat16",
                "grpo.max_num_steps": steps,
            },
        ),
    )
    rows = r.metrics(tag)
    train = [x for x in rows if "train/loss" in x]
    out: dict[str, Any] = {"exit": rc, "steps_logged": len(train)}
    out["all_finite"] = bool(train) and all(
        math.isfinite(float(x[k]))
        for x in train
        for k in ("train/loss", "train/grad_norm", "train/reward_mean")
    )
    if len(train) >= 20:
        out.update(reward_margin(train))
    mem = [x["performance/peak_gpu_memory_gib"] for x in train if "performance/peak_gpu_memory_gib" in x]
    out["peak_gpu_memory_gib"] = max(mem) if mem else None
    out["ok"] = rc == 0 and len(train) == steps and out["all_finite"]
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", default="toy,resume,bf16")
    ap.add_argument("--toy-seeds", default="42,43,44")
    ap.add_argument("--toy-steps", type=int, default=100)
    ap.add_argument("--bf16-steps", type=int, default=50)
    ap.add_argument("--timeout", type=float, default=120, help="seconds for one trainer run")
    ap.add_argument("--jobs", type=int, default=10)
    ap.add_argument("--baseline", default=str(BASELINE))
    ap.add_argument(
        "--write-baseline", action="store_true", help="record the toy margins as the CPU baseline"
    )
    args = ap.parse_args()
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    only = set(args.only.split(","))

    import torch

    report: dict[str, Any] = {
        "device": torch.cuda.get_device_name(0) if args.device == "cuda" else platform.processor() or "cpu",
        "python": platform.python_version(),
        "packages": probe(),
        "cuda": torch.version.cuda,
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    print(json.dumps({"probe": report}), flush=True)
    with tempfile.TemporaryDirectory(prefix="trainer-gpu-checks-") as tmp:
        runner = Runner(args.device, Path(tmp), args.timeout)
        jobs: dict[str, Any] = {}
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            # the longest chains (four runs one after the other) first
            if "resume" in only:
                for det in (False, True):
                    jobs[f"resume_tiny_det{int(det)}"] = pool.submit(
                        check_resume, runner, det, "tiny", "float32"
                    )
                    if args.device == "cuda":
                        jobs[f"resume_llama_bf16_det{int(det)}"] = pool.submit(
                            check_resume, runner, det, "tiny-llama", "bfloat16"
                        )
            if "resume_medium" in only:  # the benchmark's medium tiny-llama: more and wider kernels
                for det in (False, True):
                    jobs[f"resume_llama_bf16_det{int(det)}_medium"] = pool.submit(
                        check_resume, runner, det, "tiny-llama", "bfloat16", MEDIUM
                    )
            if "bf16" in only:
                jobs["bf16"] = pool.submit(check_bf16, runner, args.bf16_steps)
            if "toy" in only:
                for seed in (int(s) for s in args.toy_seeds.split(",")):
                    jobs[f"toy_seed{seed}"] = pool.submit(check_toy, runner, seed, args.toy_steps)
            results: dict[str, Any] = {}
            names = {fut: name for name, fut in jobs.items()}
            for fut in as_completed(names):
                name = names[fut]
                try:
                    results[name] = fut.result()
                except Exception as e:  # one broken check must not hide the others' numbers
                    results[name] = {"error": f"{type(e).__name__}: {e}"}
                print(json.dumps({name: results[name]}), flush=True)
                # as each one lands: a run cut short by its time limit still brings back what finished
                (out_dir / "checks.json").write_text(
                    json.dumps({**report, "checks": results}, indent=2) + "\n"
                )
                (out_dir / "checks_logs.txt").write_text("".join(runner.logs))
        (out_dir / "checks_logs.txt").write_text("".join(runner.logs))

    report["checks"] = results
    toys = {k: v for k, v in results.items() if k.startswith("toy_seed") and "margin" in v}
    if args.write_baseline and toys:
        baseline = {"config": "examples/toy-grpo.yaml cluster.ray=false", **report}
        Path(args.baseline).write_text(json.dumps(baseline, indent=2) + "\n")
    elif toys and Path(args.baseline).exists():
        cpu = json.loads(Path(args.baseline).read_text())["checks"]
        report["toy_vs_cpu"] = {
            name: {
                "cpu_margin": cpu[name]["margin"],
                "margin": toy["margin"],
                "learns_at_least_as_much": toy["margin"] >= cpu[name]["margin"],
            }
            for name, toy in toys.items()
            if "margin" in cpu.get(name, {})
        }
        print(json.dumps({"toy_vs_cpu": report["toy_vs_cpu"]}), flush=True)
    (out_dir / "checks.json").write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
