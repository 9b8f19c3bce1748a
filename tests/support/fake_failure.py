"""A real job for rule tests: prints a real failure signature on its first attempt, then succeeds.

    python tests/support/fake_failure.py KIND [--always] [--record FILE] [--checkpoint-dir DIR]

It records its argv and the env the daemon may patch (HF_HOME...) so a test can check the fix and the
checkpoint it was resumed from; with --checkpoint-dir it writes a complete NeMo RL style step_N first.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

SIGNATURES = {
    "cuda-oom": [
        "Traceback (most recent call last):",
        '  File "/opt/nemo_rl/algorithms/grpo.py", line 812, in grpo_train',
        "    train_results = policy.train(train_data, loss_fn)",
        "ray.exceptions.RayTaskError(OutOfMemoryError): ray::DTensorPolicyWorker.train() "
        "(pid=4242, ip=10.0.0.7, actor_id=abc, repr=DTensorPolicyWorker[rank=0])",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
        "79.10 GiB of which 1.02 GiB is free.",
    ],
    "hf-cache": [
        "Traceback (most recent call last):",
        '  File "/opt/nemo_rl/models/megatron/community_import.py", line 80, in import_model_from_hf_name',
        "FileNotFoundError: Pretrained run config not found at "
        "/root/.cache/huggingface/nemo_rl/Qwen/Qwen3-4B/iter_0000000/run_config.yaml on rank=1. This usually "
        "means that the one-time HF->mcore conversion on rank=0 saved to a directory not being mounted on this "
        "node. Please check",
    ],
    "nccl": [
        "[rank3]:[E1121 03:12:44.123456 4242 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective "
        "operation timeout: WorkNCCL(SeqNum=812, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) "
        "ran for 600043 milliseconds before timing out.",
    ],
    "preempted": [
        "slurmstepd: error: *** JOB {job} ON {node} CANCELLED AT 2026-11-21T03:12:44 DUE TO PREEMPTION ***"
    ],
    "node-failure": [
        "slurmstepd: error: *** JOB {job} ON {node} CANCELLED AT 2026-11-21T03:12:44 DUE TO NODE FAILURE ***"
    ],
    "host-oom": [
        "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.",
        "Memory on the node (IP: 10.0.0.4, ID: 7f3a) where the task (actor ID: 1, name=Policy.__init__, pid=9) was running was 237.01GB / 240.00GB (0.98), which exceeds the memory usage threshold of 0.95.",
    ],
    "actor-died": [
        "(raylet) ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.",
        "\tclass_name: VllmGenerationWorker",
        "\tThe actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR Worker exit detail: Worker unexpectedly exits with a connection error code 2.",
    ],
    "ray-startup": [
        "[2026-11-21 10:00:01,000 E 1234 1234] gcs_rpc_client.h:179: Failed to connect to GCS at address 10.0.0.1:6379 within 60 seconds.",
    ],
    "vllm-dead": [
        "(VllmGenerationWorker pid=9, ip=10.0.0.5) ERROR 11-21 10:00:01 [async_llm.py:420] vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause.",
    ],
    "ecc": [
        "[rank2]:[E ProcessGroupNCCL.cpp:1025] [Rank 2] NCCL watchdog thread terminated with exception: CUDA error: uncorrectable ECC error encountered",
    ],
    # One OOM, then what it causes on every rank: NCCL watchdog timeouts and dead actors (50 lines).
    "oom-burst": [
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
        "79.10 GiB of which 1.02 GiB is free.",
        *(
            f"[rank{r}]:[E1121 03:12:44.123456 4242 ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog caught collective "
            "operation timeout: WorkNCCL(SeqNum=812, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) "
            "ran for 600043 milliseconds before timing out."
            if r % 2
            else f"(raylet) ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task. rank={r}"
            for r in range(50)
        ),
    ],
    "silent": [],  # fails (exit 1) without a word: only the launcher's lines tell what happened
    "harmless": [
        "NCCL INFO NET/IB : No device found.",
        "WARNING: the out-of-memory error handler is installed",
        "Collecting rollouts: 100%|##########| 64/64 [00:01<00:00, 50.0it/s]",
    ],
}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("kind")
    ap.add_argument("--always", action="store_true", help="fail on every attempt")
    ap.add_argument("--record")
    ap.add_argument("--checkpoint-dir")
    ap.add_argument("--resume-from")
    ap.add_argument("--hang", action="store_true", help="after the bars, stop making progress but stay alive")
    ap.add_argument("--sleep", type=float, default=0.0)
    args = ap.parse_args()
    attempt = int(os.environ.get("SHEPHERD_ATTEMPT", "1"))
    if args.record:
        with open(args.record, "a") as fh:
            fh.write(
                json.dumps(
                    {
                        "attempt": attempt,
                        "argv": sys.argv[1:],
                        "hf_home": os.environ.get("HF_HOME"),
                        "job": os.environ.get("SLURM_JOB_ID"),
                    }
                )
                + "\n"
            )
    if args.checkpoint_dir and (attempt == 1 or not args.always):  # --always: no progress after the first
        step = Path(args.checkpoint_dir) / f"step_{attempt * 10}"
        step.mkdir(parents=True, exist_ok=True)
        (step / "training_info.json").write_text(
            json.dumps({"step": attempt * 10, "val:accuracy": 0.1 * attempt})
        )
    print(f"attempt {attempt} starting", flush=True)
    if args.hang and (attempt == 1 or args.always):
        for i in range(1, 4):
            print(f"Collecting rollouts: {i * 25}%|##   | {i * 16}/64 [00:0{i}<00:03, 16.0it/s]", flush=True)
            time.sleep(0.2)
        time.sleep(3600)
    if args.sleep and (attempt == 1 or args.always):
        time.sleep(args.sleep)
    if attempt > 1 and not args.always:
        print("training finished", flush=True)
        return 0
    for line in SIGNATURES[args.kind]:
        job, node = os.environ.get("SLURM_JOB_ID", "0"), os.environ.get("SLURMD_NODENAME", "node1")
        print(line.format(job=job, node=node), flush=True)
    return 0 if args.kind == "harmless" else 1


if __name__ == "__main__":
    sys.exit(main())
