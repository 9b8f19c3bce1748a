"""TensorBoard scalar reading: supervisor.watch.tbevents against tensorboard's EventAccumulator.

Writes an event file of --scalars scalars (framed with our own writer, or with
torch's SummaryWriter via --writer torch, which is slow: pure-Python CRCs),
then reads it with both readers and checks they agree. Also times an
incremental read of one appended record from a saved offset.

Last line of output: a JSON object with scalars, mb, ours_s, tensorboard_s, ratio (tensorboard / ours),
incremental_ms.
Usage: .venv/bin/python bench/tb_read.py [--scalars 200000] [--tags 8] [--writer fast|torch]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from supervisor.watch.tbevents import EventFileReader, frame_record


def write_fast(path: Path, scalars: int, tags: int) -> None:
    from tensorboard.compat.proto import event_pb2

    with open(path, "wb") as fh:
        head = event_pb2.Event(wall_time=time.time(), file_version="brain.Event:2")
        fh.write(frame_record(head.SerializeToString()))
        for i in range(scalars):
            ev = event_pb2.Event(wall_time=1.7e9 + i, step=i // tags)
            ev.summary.value.add(tag=f"train/metric_{i % tags}", simple_value=float(i))
            fh.write(frame_record(ev.SerializeToString()))


def write_torch(d: Path, scalars: int, tags: int) -> Path:
    from torch.utils.tensorboard import SummaryWriter

    w = SummaryWriter(log_dir=str(d))
    for i in range(scalars):
        w.add_scalar(f"train/metric_{i % tags}", float(i), i // tags)
    w.close()
    (f,) = d.glob("events.out.tfevents.*")
    return f


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scalars", type=int, default=200_000)
    ap.add_argument("--tags", type=int, default=8)
    ap.add_argument("--writer", choices=["fast", "torch"], default="fast")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        if args.writer == "torch":
            path = write_torch(d, args.scalars, args.tags)
        else:
            path = d / "events.out.tfevents.1700000000.bench"
            write_fast(path, args.scalars, args.tags)
        size_mb = path.stat().st_size / 1e6

        t0 = time.perf_counter()
        reader = EventFileReader(path)
        ours = []
        while True:
            res = reader.read()
            ours += res.scalars
            if res.records == 0:
                break
        ours_s = time.perf_counter() - t0

        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

        t0 = time.perf_counter()
        acc = EventAccumulator(str(d), size_guidance={"scalars": 0})
        acc.Reload()
        theirs = sum(len(acc.Scalars(tag)) for tag in acc.Tags()["scalars"])
        tb_s = time.perf_counter() - t0
        if theirs != len(ours):
            raise SystemExit(f"readers disagree: tensorboard {theirs} scalars, ours {len(ours)}")

        from tensorboard.compat.proto import event_pb2

        ev = event_pb2.Event(wall_time=time.time(), step=10**6)
        ev.summary.value.add(tag="late", simple_value=1.0)
        with open(path, "ab") as fh:
            fh.write(frame_record(ev.SerializeToString()))
        t0 = time.perf_counter()
        late = reader.read().scalars
        inc_ms = (time.perf_counter() - t0) * 1000
        assert [s.tag for s in late] == ["late"]

    result = {
        "scalars": len(ours),
        "mb": round(size_mb, 1),
        "ours_s": round(ours_s, 3),
        "tensorboard_s": round(tb_s, 3),
        "ratio": round(tb_s / ours_s, 1) if ours_s > 0 else None,
        "incremental_ms": round(inc_ms, 3),
    }
    print(f"ours {ours_s:.2f}s, EventAccumulator {tb_s:.2f}s on {len(ours)} scalars ({size_mb:.1f} MB)")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
