"""A real job for the checkpoint interval's test: it trains, saving the way NeMo RL does, and fails once.

    python tests/support/fake_saver.py --checkpoint-dir DIR --steps N --fail-at K [--record FILE]
        [--step-s S] [--save-s S] checkpointing.save_period=P ...

Each step prints NeMo RL's banner and result block (what the monitor reads from ray-driver.log). Every step
that is a multiple of the last `checkpointing.save_period=P` argument (Hydra's: the last one wins) is saved
as NeMo RL saves it: `tmp_step_N/` with training_info.json and config.yaml first, the state (taking
`--save-s`), then the rename to `step_N/`. It resumes by itself from its newest step. The first attempt fails
at step K with an NCCL watchdog line; each attempt records its argv and period to `--record`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path

PERIOD_RE = re.compile(r"^(?:\+\+|\+)?checkpointing\.save_period=(\d+)$")
NCCL = (
    "[rank0]:[E1127 15:00:00.000000 4242 ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective "
    "operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) "
    "ran for 600043 milliseconds before timing out."
)


def save(ck: Path, step: int, period: int, save_s: float) -> None:
    tmp = ck / f"tmp_step_{step}"
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "training_info.json").write_text(json.dumps({"step": step, "val:accuracy": step / 100}))
    (tmp / "config.yaml").write_text(f"checkpointing:\n  save_period: {period}\n  keep_top_k: 3\n")
    time.sleep(save_s)  # the weights being written
    (tmp / "policy.pt").write_bytes(b"w" * 4096)
    tmp.rename(ck / f"step_{step}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--checkpoint-dir", required=True)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--fail-at", type=int, required=True)
    ap.add_argument("--record")
    ap.add_argument("--step-s", type=float, default=0.2)
    ap.add_argument("--save-s", type=float, default=0.3)
    args, rest = ap.parse_known_args()
    periods = [int(m.group(1)) for a in rest if (m := PERIOD_RE.match(a))]
    period = periods[-1] if periods else 10
    attempt = int(os.environ.get("SHEPHERD_ATTEMPT", "1"))
    if args.record:
        with open(args.record, "a") as fh:
            fh.write(json.dumps({"attempt": attempt, "argv": sys.argv[1:], "save_period": period}) + "\n")
    ck = Path(args.checkpoint_dir)
    done = [
        int(p.name.removeprefix("step_")) for p in ck.glob("step_*") if (p / "training_info.json").exists()
    ]
    for step in range(max(done, default=0) + 1, args.steps + 1):
        if attempt == 1 and step == args.fail_at:
            print(NCCL, flush=True)
            return 1
        print(f"========================= Step {step}/{args.steps} =========================", flush=True)
        time.sleep(args.step_s)  # the step's work
        print("📊 Training Results:\n  • Loss: 0.1000\n  • Avg Reward: 0.5000", flush=True)
        if step % period == 0:
            print(f"Saving checkpoint for step {step}...", flush=True)
            save(ck, step, period, args.save_s)
    return 0


if __name__ == "__main__":
    sys.exit(main())
