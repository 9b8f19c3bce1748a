"""A stand-in for a NeMo RL GRPO driver with NeMo RL's checkpoint behaviour, for real-Slurm tests.

    python tests/support/nemo_rl_standin.py checkpointing.checkpoint_dir=DIR [--steps N] [--save-every K]
        [--peak STEP] [--fail-at STEP] [--failure hf-cache|odd] [--record FILE]

Like NeMo RL it always resumes from the highest complete `step_N` in `checkpointing.checkpoint_dir` (a later
override of the key wins), saves into `tmp_step_N/` (`training_info.json`, `config.yaml`) and renames it to
`step_N/`. On its first attempt (SHEPHERD_ATTEMPT=1) it stops at --fail-at with NeMo RL's HF-cache error
(or an unrecognised one). val:accuracy peaks at --peak so `best` is not the newest step. Each attempt's
resume point is appended to --record for the test to check.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path

HF_CACHE_ERROR = (
    "FileNotFoundError: Pretrained run config not found at "
    "/root/.cache/huggingface/nemo_rl/Qwen/Qwen3-4B/iter_0000000/run_config.yaml on rank=1. This usually "
    "means that the one-time HF->mcore conversion on rank=0 saved to a directory not being mounted on this "
    "node. Please check"
)


def newest_step(ckdir: Path) -> int:
    """NeMo RL's rule: the highest step_N holding training_info.json (links count)."""
    steps = [
        int(m.group(1))
        for p in (ckdir.iterdir() if ckdir.is_dir() else [])
        if (m := re.fullmatch(r"step_(\d+)", p.name)) and (p / "training_info.json").is_file()
    ]
    return max(steps, default=0)


def save(ckdir: Path, step: int, accuracy: float) -> None:
    tmp = ckdir / f"tmp_step_{step}"
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "config.yaml").write_text(f"checkpointing:\n  checkpoint_dir: {ckdir}\n")
    (tmp / "training_info.json").write_text(json.dumps({"step": step, "val:accuracy": accuracy}))
    tmp.rename(ckdir / f"step_{step}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--save-every", type=int, default=10)
    ap.add_argument("--peak", type=int, default=10)
    ap.add_argument("--fail-at", type=int, default=0, help="on the first attempt, fail after this step")
    ap.add_argument("--failure", choices=["hf-cache", "odd"], default="hf-cache")
    ap.add_argument("--record")
    args, overrides = ap.parse_known_args()
    cfg = dict(o.split("=", 1) for o in overrides if "=" in o)  # the last value of a key wins
    ckdir = Path(cfg["checkpointing.checkpoint_dir"])
    attempt = int(os.environ.get("SHEPHERD_ATTEMPT", "1"))
    start = newest_step(ckdir)
    if args.record:
        with open(args.record, "a") as fh:
            rec = {"attempt": attempt, "resumed_from": start, "checkpoint_dir": str(ckdir)}
            rec["hf_home"] = os.environ.get("HF_HOME")
            rec["env_checkpoint_dir"] = os.environ.get("SHEPHERD_CHECKPOINT_DIR")
            fh.write(json.dumps(rec) + "\n")
    where = f"Loading checkpoint from {ckdir / f'step_{start}'}" if start else "Starting from scratch"
    print(where, flush=True)
    for step in range(start + 1, args.steps + 1):
        if step % args.save_every == 0:
            save(ckdir, step, round(1.0 - abs(step - args.peak) / 100, 4))
            print(f"Saved checkpoint step_{step}", flush=True)
        if attempt == 1 and step == args.fail_at:
            print("Traceback (most recent call last):", flush=True)
            if args.failure == "hf-cache":
                frame = '  File "/opt/nemo_rl/models/megatron/community_import.py", line 80, in import_model'
                print(frame, flush=True)
                print(HF_CACHE_ERROR, flush=True)
            else:
                print("RuntimeError: the stand-in stopped on purpose", flush=True)
            return 1
    print(f"Training finished at step {args.steps}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
