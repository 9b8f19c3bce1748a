"""A stand-in for NeMo RL's GRPO driver (`examples/run_grpo.py`) that writes exactly NeMo RL's files, for
real-Slurm tests: its banners and result blocks, its checkpoint layout and retention, its TensorBoard tags,
its exp_NNN per launch, its save deadline and its exits (read from NeMo RL's source: nemo_rl/algorithms/
grpo.py, nemo_rl/utils/checkpoint.py, nemo_rl/utils/timer.py; ../shared/reference/nemo-rl-facts.md).

    python tests/support/nemo_rl_standin.py checkpointing.checkpoint_dir=DIR [key=value ...] [options]

NeMo RL's own keys it reads (Hydra-style `key=value`, the last one wins): checkpointing.checkpoint_dir,
.save_period (10), .keep_top_k (keep all), .metric_name (val:accuracy), .higher_is_better (true),
.checkpoint_must_save_by (DD:HH:MM:SS after start, none), grpo.max_num_steps (--steps, 40), grpo.val_period
(= save_period), logger.log_dir, logger.tensorboard_enabled (true when logger.log_dir is given).

Like NeMo RL it always resumes from the highest complete `step_N`; writes `tmp_step_N/` (training_info.json
first, then config.yaml, policy/, train_dataloader.pt) and renames it to `step_N/` (through old_step_N);
writes latest_checkpoint_status.json; keeps the top `keep_top_k` save_period-aligned steps by the metric plus
the latest and `shutil.rmtree`s the rest inside the save (v0.6.0: a symlinked step crashes the run); prints
`Timeout has been reached, stopping training early` after the deadline save and
`Max number of steps has been reached, stopping training early` at the end, both with exit 0.

What is not NeMo RL (each said where a test relies on it): no model, no Ray work (with --ray it only joins
the cluster), metrics from formulas (reward rises, val:accuracy peaks at --peak), and
--deadline-scale, which counts the deadline faster so a test does not wait minutes for a real one.
Options: --fail-at STEP with --failure hf-cache|odd|nccl|gpu (--fault-node N: the node a gpu fault names; on
attempts up to --fail-attempts, default the first), --hf-cache-check DIR (NeMo
RL's HF->mcore error at policy init, every attempt, until HF_HOME or NRL_MEGATRON_CHECKPOINT_DIR is in DIR),
--nan-at STEP (train/reward is NaN there), --resumed-gain X (a resumed attempt validates X better, so
retention drops the step it resumed from), --step-seconds S, --record FILE (one JSON line per attempt),
--ray (join the Ray cluster ray.sub started, as NeMo RL's init_ray does, and record what it offers).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import socket
import struct
import sys
import time
from pathlib import Path
from typing import Any

HF_CACHE_ERROR = (
    "FileNotFoundError: Pretrained run config not found at "
    "/root/.cache/huggingface/nemo_rl/Qwen/Qwen3-4B/iter_0000000/run_config.yaml on rank=1. This usually "
    "means that the one-time HF->mcore conversion on rank=0 saved to a directory not being mounted on this "
    "node. Please check"
)
BANNER = "=" * 25


def newest_step(ckdir: Path) -> int:
    """NeMo RL's rule: the highest step_N holding training_info.json (links count)."""
    steps = [
        int(m.group(1))
        for p in (ckdir.iterdir() if ckdir.is_dir() else [])
        if (m := re.fullmatch(r"step_(\d+)", p.name)) and (p / "training_info.json").is_file()
    ]
    return max(steps, default=0)


def seconds(ddhhmmss: str) -> float:
    """nemo_rl.utils.timer.convert_to_seconds: `DD:HH:MM:SS` (or fewer fields)."""
    parts = [int(x) for x in ddhhmmss.split(":")]
    total = 0
    for unit, value in zip((1, 60, 3600, 86400), reversed(parts), strict=False):
        total += unit * value
    return float(total)


# ---- TensorBoard records, encoded here with the standard library (independently of the supervisor's reader)
def _crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


def _masked_crc(data: bytes) -> int:
    crc = _crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _len_field(num: int, payload: bytes) -> bytes:
    return _varint(num << 3 | 2) + _varint(len(payload)) + payload


def tb_record(step: int, scalars: dict[str, float] | None = None, file_version: str = "") -> bytes:
    """One TFRecord holding an `Event` (wall_time=1, step=2, file_version=3, summary=5 { value=1 { tag=1,
    simple_value=2 } }): `uint64 len | masked crc32c(len) | data | masked crc32c(data)`."""
    event = b"\x09" + struct.pack("<d", time.time()) + b"\x10" + _varint(step)
    if file_version:
        event += _len_field(3, file_version.encode())
    if scalars:
        values = b"".join(
            _len_field(1, _len_field(1, tag.encode()) + b"\x15" + struct.pack("<f", v))
            for tag, v in scalars.items()
        )
        event += _len_field(5, values)
    length = struct.pack("<Q", len(event))
    return length + struct.pack("<I", _masked_crc(length)) + event + struct.pack("<I", _masked_crc(event))


class Logger:
    """NeMo RL's logger: a new `exp_NNN/` per launch, `tensorboard/` in it only when enabled."""

    def __init__(self, log_dir: Path | None, tensorboard: bool) -> None:
        self.events: Path | None = None
        if log_dir is None:
            return
        nums = [int(m.group(1)) for p in log_dir.glob("exp_*") if (m := re.fullmatch(r"exp_(\d+)", p.name))]
        exp = log_dir / f"exp_{max(nums, default=0) + 1:03d}"
        exp.mkdir(parents=True)
        if tensorboard:
            tb = exp / "tensorboard"
            tb.mkdir()
            self.events = (
                tb / f"events.out.tfevents.{int(time.time())}.{socket.gethostname()}.{os.getpid()}.0"
            )
            self.events.write_bytes(tb_record(0, file_version="brain.Event:2"))

    def log(self, scalars: dict[str, float], step: int, prefix: str) -> None:
        if self.events is not None:
            with open(self.events, "ab") as fh:
                fh.write(tb_record(step, {f"{prefix}/{k}": v for k, v in scalars.items()}))


class Checkpointer:
    """nemo_rl/utils/checkpoint.py's CheckpointManager, the parts a supervisor sees."""

    def __init__(self, cfg: dict[str, str]) -> None:
        self.dir = Path(cfg["checkpointing.checkpoint_dir"])
        self.save_period = int(cfg.get("checkpointing.save_period", "10"))
        top_k = cfg.get("checkpointing.keep_top_k", "null")
        self.keep_top_k = None if top_k in ("null", "None", "") else int(top_k)
        self.metric = cfg.get("checkpointing.metric_name", "val:accuracy")
        self.higher = cfg.get("checkpointing.higher_is_better", "true").lower() == "true"
        self.config = cfg

    def save(self, step: int, info: dict[str, Any]) -> None:
        print(f"Saving checkpoint for step {step}...", flush=True)
        tmp = self.dir / f"tmp_step_{step}"
        if tmp.exists():
            shutil.rmtree(tmp)
        tmp.mkdir(parents=True)
        (tmp / "training_info.json").write_text(json.dumps(info))  # first, as init_tmp_checkpoint does
        config = {
            "grpo": {"max_num_steps": int(self.config.get("grpo.max_num_steps", "40"))},
            "checkpointing": {
                k.split(".", 1)[1]: v for k, v in self.config.items() if k.startswith("checkpointing.")
            },
        }
        (tmp / "config.yaml").write_text(json.dumps(config))  # JSON is YAML
        weights = tmp / "policy" / "weights"
        weights.mkdir(parents=True)
        (weights / "model.safetensors").write_bytes(struct.pack("<d", float(step)) * 64)
        (tmp / "policy" / "optimizer").mkdir()
        (tmp / "train_dataloader.pt").write_bytes(b"dataloader-state")
        final = self.dir / f"step_{step}"
        if final.exists():  # _rename_checkpoint: a pseudo-atomic swap through old_step_N
            old = self.dir / f"old_step_{step}"
            final.rename(old)
            tmp.rename(final)
            shutil.rmtree(old)
        else:
            tmp.rename(final)
        status = {"last_successful_ckpt_save_completion": time.time(), "last_checkpoint_step": step}
        (self.dir / "latest_checkpoint_status.json").write_text(json.dumps(status))
        self.remove_old_checkpoints()

    def remove_old_checkpoints(self) -> None:
        """Top-k periodic steps by the metric (ties to the newer) plus the latest survive; the rest is
        `shutil.rmtree`d, which raises OSError on a symlink (v0.6.0 does it inside the save: a crash)."""
        if self.keep_top_k is None:
            return
        history = []
        for p in self.dir.glob("step_*"):
            m = re.fullmatch(r"step_(\d+)", p.name)
            if m and (p / "training_info.json").exists():
                history.append((int(m.group(1)), p, json.loads((p / "training_info.json").read_text())))
        if not history:
            return
        protected = {max(s for s, _, _ in history)}
        periodic = [h for h in history if h[0] % self.save_period == 0]
        missing = -math.inf if self.higher else math.inf
        periodic.sort(key=lambda h: (h[2].get(self.metric, missing), h[0]), reverse=self.higher)
        protected.update(s for s, _, _ in periodic[: self.keep_top_k])
        for step, path, _ in history:
            if step not in protected:
                print(f"Removing checkpoint {path} (step {step})", flush=True)
                shutil.rmtree(path)


def fail(kind: str, node: str = "") -> int:
    print("Traceback (most recent call last):", flush=True)
    if kind == "gpu":  # a GPU fault pinned to a node (cuda-hardware-error excludes it)
        print(f"RuntimeError: CUDA error: uncorrectable ECC error encountered (hostname={node})", flush=True)
    elif kind == "hf-cache":
        print(
            '  File "/opt/nemo_rl/models/megatron/community_import.py", line 80, in import_model', flush=True
        )
        print(HF_CACHE_ERROR, flush=True)
    elif kind == "nccl":
        print(
            "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
            "NCCLUtils.hpp:317, unhandled system error (run with NCCL_DEBUG=INFO for details), "
            "NCCL version 2.21.5",
            flush=True,
        )
    else:
        print("RuntimeError: the stand-in stopped on purpose", flush=True)
    return 1


def policy_init(shared: str | None) -> int | None:
    """NeMo RL's Megatron policy init: the HF->mcore conversion dir must be on storage every node mounts."""
    if shared is None:
        return None
    where = os.environ.get("NRL_MEGATRON_CHECKPOINT_DIR") or os.environ.get("HF_HOME") or ""
    if where.startswith(shared.rstrip("/") + "/") or where == shared:
        return None
    print("Traceback (most recent call last):", flush=True)
    print('  File "/opt/nemo_rl/examples/run_grpo.py", line 200, in <module>', flush=True)
    print(
        "ray.exceptions.RayTaskError(FileNotFoundError): ray::MegatronPolicyWorker.__init__() "
        f"(pid={os.getpid()}, ip=10.0.0.2, actor_id=abc)",
        flush=True,
    )
    print(HF_CACHE_ERROR, flush=True)
    return 1


def join_ray() -> dict[str, float]:
    """NeMo RL's init_ray: join the cluster ray.sub started; what it offers (`worker_units` per GPU)."""
    import ray  # only under ray.sub: the plain-Slurm tests run without a Ray cluster

    ray.init(address="auto", log_to_driver=False)
    try:
        nodes = sum(1 for n in ray.nodes() if n.get("Alive"))
        return {"nodes": nodes, "worker_units": ray.cluster_resources().get("worker_units", 0.0)}
    finally:
        ray.shutdown()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=40, help="grpo.max_num_steps unless given as a key")
    ap.add_argument("--save-every", type=int, help="checkpointing.save_period unless given as a key")
    ap.add_argument("--peak", type=int, default=10)
    ap.add_argument("--fail-at", type=int, default=0, help="on the first attempt, fail at this step")
    ap.add_argument("--failure", choices=["hf-cache", "odd", "nccl", "gpu"], default="hf-cache")
    ap.add_argument("--fault-node", default="", help="the node a gpu failure names")
    ap.add_argument("--fail-attempts", type=int, default=1, help="fail at --fail-at on attempts up to this")
    ap.add_argument("--hf-cache-check", metavar="SHARED_DIR")
    ap.add_argument("--record")
    ap.add_argument("--nan-at", type=int, default=0, help="train/reward is NaN at this step")
    ap.add_argument("--step-seconds", type=float, default=0.0)
    ap.add_argument(
        "--no-summary", action="store_true", help="no per-step results printed: only TensorBoard has them"
    )
    ap.add_argument("--deadline-scale", type=float, default=1.0)
    ap.add_argument("--resumed-gain", type=float, default=0.0, help="val:accuracy added after attempt 1")
    ap.add_argument("--ray", action="store_true", help="join the Ray cluster first (under ray.sub)")
    args, overrides = ap.parse_known_args()
    cfg = dict(o.split("=", 1) for o in overrides if "=" in o)  # the last value of a key wins
    cfg.setdefault("grpo.max_num_steps", str(args.steps))
    cfg.setdefault("checkpointing.save_period", str(args.save_every or 10))
    max_steps = int(cfg["grpo.max_num_steps"])
    val_period = int(cfg.get("grpo.val_period", cfg["checkpointing.save_period"]))
    ckpt = Checkpointer(cfg)
    deadline = cfg.get("checkpointing.checkpoint_must_save_by")
    budget = seconds(deadline) * args.deadline_scale if deadline not in (None, "null") else math.inf
    attempt = int(os.environ.get("SHEPHERD_ATTEMPT", "1"))
    start = newest_step(ckpt.dir)
    cluster = join_ray() if args.ray else None
    if args.record:
        with open(args.record, "a") as fh:
            rec = {
                "attempt": attempt,
                "resumed_from": start,
                "checkpoint_dir": str(ckpt.dir),
                "deadline": deadline,
            }
            rec["hf_home"] = os.environ.get("HF_HOME")
            rec["env_checkpoint_dir"] = os.environ.get("SHEPHERD_CHECKPOINT_DIR")
            rec["job"] = os.environ.get("SLURM_JOB_ID")
            rec["ray"] = cluster
            # What the pyxis stand-in recorded of the container request (under NeMo RL's ray.sub).
            rec["pyxis"] = {k[15:]: v for k, v in os.environ.items() if k.startswith("SHEPHERD_PYXIS_")}
            fh.write(json.dumps(rec) + "\n")
    failed = policy_init(args.hf_cache_check)
    if failed is not None:
        return failed
    print(
        f"Loading checkpoint from {ckpt.dir / f'step_{start}'}" if start else "Starting from scratch",
        flush=True,
    )
    started = time.monotonic()  # NeMo RL's TimeoutChecker starts with the training loop
    log_dir = cfg.get("logger.log_dir")
    tb = cfg.get("logger.tensorboard_enabled", "true" if log_dir else "false").lower() == "true"
    logger = Logger(Path(log_dir) if log_dir else None, tb)
    accuracy = 0.0
    for step in range(start + 1, max_steps + 1):
        t0 = time.monotonic()
        print(f"\n{BANNER} Step {step}/{max_steps} {BANNER}", flush=True)
        if args.step_seconds:
            time.sleep(args.step_seconds)
        if attempt <= args.fail_attempts and step == args.fail_at:
            return fail(args.failure, args.fault_node)
        reward = float("nan") if step == args.nan_at else step / max_steps
        loss = 1.0 / step
        validated = step % val_period == 0 or step == max_steps
        if validated:
            gain = args.resumed_gain if attempt > 1 else 0.0
            accuracy = round(1.0 - abs(step - args.peak) / 100 + gain, 4)
            print(f"▶ Starting validation at step {step}...", flush=True)
            print("\n📊 Validation Results:", flush=True)
            print(f"    • Accuracy: {accuracy:.4f}", flush=True)
            print("    • Average response length: 12.5 tokens", flush=True)
            logger.log({"accuracy": accuracy, "avg_length": 12.5}, step, "validation")
        last = step == max_steps
        timed_out = time.monotonic() - started >= budget
        if last or timed_out or step % ckpt.save_period == 0:
            info = {
                "consumed_samples": step * 8, "current_step": step, "current_epoch": 0, "total_steps": step,
                "total_valid_tokens": step * 1000, "sampler_name": "train", ckpt.metric: accuracy,
                **({"val_reward": accuracy} if validated else {}),
            }  # fmt: skip
            ckpt.save(step, info)
        if not args.no_summary:
            print("\n📊 Training Results:", flush=True)
            print(f"  • Loss: {loss:.4f}", flush=True)
            print("  • Generation KL Error: 0.0010", flush=True)
            print(f"  • Avg Reward: {reward:.4f}", flush=True)
            print("  • Mean Generation Length: 12.0000", flush=True)
        step_time = time.monotonic() - t0
        print("\n⏱️  Timing:", flush=True)
        print(f"  • Total step time: {step_time:.2f}s", flush=True)
        logger.log({"reward": reward, "loss": loss}, step, "train")
        logger.log({"total_step_time": step_time}, step, "timing/train")
        if timed_out:
            print("Timeout has been reached, stopping training early", flush=True)
            return 0
    print("Max number of steps has been reached, stopping training early", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
