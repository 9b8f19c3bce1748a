"""A stand-in for a NeMo RL GRPO driver with NeMo RL's checkpoint behaviour, for real-Slurm tests.

    python tests/support/nemo_rl_standin.py checkpointing.checkpoint_dir=DIR [--steps N] [--save-every K]
        [--peak STEP] [--fail-at STEP] [--failure hf-cache|odd] [--record FILE] [logger.log_dir=DIR]
        [--nan-at STEP]

Like NeMo RL it always resumes from the highest complete `step_N` in `checkpointing.checkpoint_dir` (a later
override of the key wins), saves into `tmp_step_N/` (`training_info.json`, `config.yaml`) and renames it to
`step_N/`. On its first attempt (SHEPHERD_ATTEMPT=1) it stops at --fail-at with NeMo RL's HF-cache error
(or an unrecognised one). val:accuracy peaks at --peak so `best` is not the newest step. Each attempt's
resume point is appended to --record for the test to check.

With `logger.log_dir=DIR`, like NeMo RL it logs scalars only to TensorBoard (no metrics.jsonl): each launch
makes the next `DIR/exp_NNN/` and writes `tensorboard/events.out.tfevents.<time>.<host>.<pid>.0` in the
real TFRecord/Event format (encoded here with the standard library, independently of the supervisor's
reader), one `train/reward` and `train/loss` per step; `train/reward` is NaN at --nan-at.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import struct
import sys
import time
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


def tb_writer(log_dir: Path) -> Path:
    """NeMo RL's layout: the next `exp_NNN/` of this launch, an event file opened with its version record."""
    nums = [int(m.group(1)) for p in log_dir.glob("exp_*") if (m := re.fullmatch(r"exp_(\d+)", p.name))]
    tb = log_dir / f"exp_{max(nums, default=0) + 1:03d}" / "tensorboard"
    tb.mkdir(parents=True)
    path = tb / f"events.out.tfevents.{int(time.time())}.{socket.gethostname()}.{os.getpid()}.0"
    path.write_bytes(tb_record(0, file_version="brain.Event:2"))
    return path


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--save-every", type=int, default=10)
    ap.add_argument("--peak", type=int, default=10)
    ap.add_argument("--fail-at", type=int, default=0, help="on the first attempt, fail after this step")
    ap.add_argument("--failure", choices=["hf-cache", "odd"], default="hf-cache")
    ap.add_argument("--record")
    ap.add_argument("--nan-at", type=int, default=0, help="log train/reward as NaN at this step")
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
    events = tb_writer(Path(cfg["logger.log_dir"])) if "logger.log_dir" in cfg else None
    for step in range(start + 1, args.steps + 1):
        if events is not None:
            reward = float("nan") if step == args.nan_at else step / args.steps
            with open(events, "ab") as fh:
                fh.write(tb_record(step, {"train/reward": reward, "train/loss": 1.0 / step}))
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
