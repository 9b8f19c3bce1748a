"""How much metadata load and CPU does watching N active runs cost, and how fast are failure lines found?

N simulated runs write their files from writer processes at realistic rates: the driver log redraws a tqdm
bar every second and logs a line every 5 s, three worker logs log a line every 30-90 s, the TensorBoard
event file grows every 5 s, a checkpoint folder appears now and then; `slurm-J.out` and a fourth worker
log stay quiet. The daemon's watcher (`fswatch.ChangeSource`, polling forced, as on NFS/Lustre/GPFS) and
tailer run in this process; after a warm-up the writers inject failure lines at random into active files
(driver logs) and into long-quiet ones, and the time from the write to the line read is measured.

Filesystem operations are counted by the watcher's own filesystem layer (`OsProbe.ops`: opens and
listings of the polling sweep, the budgeted quantity) plus the tailer's opens of changed files (reads).
The baseline, measured in the same run, is the sweep this replaced: every watched path opened and
fstat'ed every 2 s.

    python bench/active_runs.py --runs 10,100,500 --warmup 45 --measure 45

Last line: JSON with runs, fs_ops_per_s, cpu_percent, active_p99_s, quiet_p99_s (largest N) and a per-N
table; saved to bench/results/active_runs.json. A latency percentile is null when it falls on a line not
found within GRACE_S after the measured stretch (`missed` counts them).
"""

from __future__ import annotations

import argparse
import heapq
import json
import multiprocessing as mp
import os
import random
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import structlog

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from supervisor.watch.fswatch import LISTING_OPS, ChangeSource, OsProbe, file_signature
from supervisor.watch.pollplan import Cadence
from supervisor.watch.tailer import Follower, MemoryCursorStore

MARK = "FATAL injected-"
GRACE_S = 45.0  # after the measured stretch: the quiet interval (30 s) plus lag, to find the last injections
BAR = "\r {pct:3d}%|{bar:<20}| {n}/200 [00:{n:02d}<01:00, 3.2it/s]"


def layout(root: Path, i: int) -> dict[str, Path]:
    run = root / f"run{i:04d}"
    logs = run / f"{7000 + i}-logs"
    return {
        "run": run,
        "logs": logs,
        "ckpt": run / "checkpoints",
        "out": run / f"slurm-{7000 + i}.out",
        "driver": logs / "ray-driver.log",
        "workers": [logs / f"ray-worker-{k}.log" for k in range(3)],  # type: ignore[dict-item]
        "quiet_worker": logs / "ray-worker-3.log",
        "events": run / "tensorboard" / "events.out.tfevents.1.host",
    }


def make_runs(root: Path, n: int) -> None:
    for i in range(n):
        p = layout(root, i)
        for d in ("logs", "ckpt"):
            p[d].mkdir(parents=True)
        p["events"].parent.mkdir(parents=True)
        p["out"].write_text("[ray.sub] starting head\n")
        p["driver"].write_text("Step 1/100\n")
        for w in p["workers"]:  # type: ignore[attr-defined]
            w.write_text("worker up\n")
        p["quiet_worker"].write_text("worker up\n")
        p["events"].write_bytes(b"\0" * 64)


def append(path: Path, data: str | bytes) -> None:
    with open(path, "ab") as fh:
        fh.write(data.encode() if isinstance(data, str) else data)


def writer(
    root: str, runs: list[int], n_runs: int, warmup: float, measure: float, seed: int, out: Any
) -> None:
    """One writer process: its share of the runs' writes, and its share of the injected failure lines."""
    rng = random.Random(seed)
    base = Path(root)
    start = time.time()
    end = start + warmup + measure + GRACE_S  # the writes go on while the last injections are looked for
    # (next time, run, what) for every periodic write
    due: list[tuple[float, int, str]] = []
    for i in runs:
        due += [(start + rng.random(), i, "bar"), (start + rng.random() * 5, i, "line")]
        due += [(start + rng.random() * 5, i, "events"), (start + 20 + rng.random() * 100, i, "ckpt")]
        due += [(start + 30 + rng.random() * 60, i, f"w{k}") for k in range(3)]
    quiet = [(i, kind) for i in runs for kind in ("out", "quiet_worker")]
    rng.shuffle(quiet)
    n_inject = max(1, 30 * len(runs) // n_runs)
    injections = sorted(
        (start + warmup + rng.random() * measure, kind)
        for kind in ["active"] * n_inject + ["quiet"] * min(n_inject, len(quiet))
    )
    injected: list[dict[str, Any]] = []
    step = 0
    heapq.heapify(due)
    while time.time() < end:
        now = time.time()
        while due and due[0][0] <= now:
            _, i, what = heapq.heappop(due)
            p = layout(base, i)
            if what == "bar":
                step = (step + 1) % 200
                append(p["driver"], BAR.format(pct=step // 2, bar="#" * (step // 10), n=step % 60))
                heapq.heappush(due, (now + 1.0, i, what))
            elif what == "line":
                append(p["driver"], f"\nStep {step}/100: loss 0.{rng.randint(100, 999)}\n")
                heapq.heappush(due, (now + 5.0, i, what))
            elif what == "events":
                append(p["events"], os.urandom(96))
                heapq.heappush(due, (now + 5.0, i, what))
            elif what == "ckpt":
                (p["ckpt"] / f"step_{int(now)}").mkdir(exist_ok=True)
                heapq.heappush(due, (now + 60 + rng.random() * 60, i, what))
            else:
                append(p["workers"][int(what[1])], f"(RolloutWorker pid={i}) generated batch {step}\n")  # type: ignore[index]
                heapq.heappush(due, (now + 30 + rng.random() * 60, i, what))
        while injections and injections[0][0] <= now:
            _, kind = injections.pop(0)
            ident = f"{seed}-{len(injected)}"
            if kind == "active":
                target = layout(base, rng.choice(runs))["driver"]
            else:
                i, which = quiet.pop()
                target = layout(base, i)[which]
            append(target, f"\n{MARK}{ident} CUDA error: an illegal memory access was encountered\n")
            injected.append({"id": ident, "kind": kind, "at": time.time(), "path": str(target)})
        time.sleep(0.02)
    out.put(injected)


def rss_mb() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def watched_paths(root: Path, n: int) -> tuple[list[str], list[str], list[str]]:
    files, progress, folders = [], [], []
    for i in range(n):
        p = layout(root, i)
        files += [str(p["out"]), str(p["driver"]), str(p["quiet_worker"])]
        files += [str(w) for w in p["workers"]]  # type: ignore[attr-defined]
        progress.append(str(p["events"]))
        folders += [str(p["logs"]), str(p["ckpt"])]
    return files, progress, folders


def baseline(root: Path, n: int, seconds: float) -> dict[str, float]:
    """The sweep this replaced: every watched path opened and fstat'ed every 2 s."""
    files, progress, folders = watched_paths(root, n)
    paths = files + progress + folders
    ops, c0, t0 = 0, cpu_s(), time.time()
    while time.time() - t0 < seconds:
        started = time.time()
        for p in paths:
            file_signature(p)
            ops += 1
        time.sleep(max(0.0, 2.0 - (time.time() - started)))
    wall = time.time() - t0
    return {"fs_ops_per_s": ops / wall, "cpu_percent": 100 * (cpu_s() - c0) / wall}


async def watch(root: Path, n: int, budget: float, warmup: float, measure: float) -> dict[str, Any]:
    probe = OsProbe()
    found: dict[str, float] = {}
    reads = 0
    follower = Follower(MemoryCursorStore())
    src = ChangeSource(force_polling=True, cadence=Cadence.scaled(2.0, ops_per_s=budget), probe=probe)
    files, progress, folders = watched_paths(root, n)
    for i, p in enumerate(files):
        src.add(p, group=i // 6)
    for p in progress:
        src.add(p, progress=True)
    for p in folders:
        src.add(p, is_dir=True)
    watched = set(files)
    samples: dict[str, float] = {}

    async def consume() -> None:
        nonlocal reads
        async for changed in src:
            for path in changed & watched:
                while True:
                    reads += 1
                    res = follower.poll(path)
                    follower.commit(res, persist=False)
                    for b in res.batches:
                        for text in b.texts:
                            if MARK in text:
                                ident = text.split(MARK, 1)[1].split(" ", 1)[0]
                                found.setdefault(ident, time.time())
                    if not res.more:
                        break

    async with src, anyio.create_task_group() as tg:
        tg.start_soon(consume)
        await anyio.sleep(warmup)
        ops0, reads0, c0, t0 = sum(probe.ops.values()), reads, cpu_s(), time.time()
        kinds0 = dict(probe.ops)
        await anyio.sleep(measure)
        wall = time.time() - t0
        kinds = {k: round((v - kinds0.get(k, 0)) / wall, 1) for k, v in probe.ops.items()}
        samples = {
            "fs_ops_per_s": (sum(probe.ops.values()) - ops0) / wall,
            # file opens, folder opens (mtime checks), getdents passes; and what listing a folder at every
            # check would have cost instead of listing it only when its mtime moved
            "ops_by_kind_per_s": kinds,
            "listing_every_check_would_add_per_s": round(
                kinds.get("folder_open", 0) * LISTING_OPS - kinds.get("listing", 0), 1
            ),
            "read_opens_per_s": (reads - reads0) / wall,
            "cpu_percent": 100 * (cpu_s() - c0) / wall,
            "rss_mb": rss_mb(),
        }
        load = src.load()
        await anyio.sleep(GRACE_S)  # the writers go on; the last injections are still looked for
        tg.cancel_scope.cancel()
    return {**samples, "found": found, "load": load}


def pct(values: list[float], q: float) -> float | None:
    """The q-quantile; None when it falls on a line not found at all within the grace (GRACE_S)."""
    if not values:
        return None
    s = sorted(values)
    v = s[min(len(s) - 1, int(q * len(s)))]
    return None if v == float("inf") else round(v, 3)


def measure_n(n: int, budget: float, warmup: float, measure: float, writers: int) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix=f"shepherd-active-{n}-"))
    try:
        make_runs(root, n)
        base = baseline(root, n, 6.0)
        q: Any = mp.get_context("fork").Queue()
        shares = [list(range(n))[k::writers] for k in range(writers)]
        procs = [
            mp.get_context("fork").Process(
                target=writer, args=(str(root), share, n, warmup, measure, 1000 * n + k, q)
            )
            for k, share in enumerate(shares)
            if share
        ]
        for p in procs:
            p.start()
        got = anyio.run(watch, root, n, budget, warmup, measure)
        injected = [item for _ in procs for item in q.get(timeout=120)]
        for p in procs:
            p.join(timeout=30)
        lat: dict[str, list[float]] = {"active": [], "quiet": []}
        missed = {"active": 0, "quiet": 0}
        for item in injected:
            at = got["found"].get(item["id"])
            if at is None:
                missed[item["kind"]] += 1
                lat[item["kind"]].append(float("inf"))  # counted: a miss is the slowest detection
            else:
                lat[item["kind"]].append(at - item["at"])
        load = got["load"]
        return {
            "runs": n,
            "watched_files": n * 7,
            "watched_folders": n * 2,
            "budget_ops_per_s": budget,
            "fs_ops_per_s": round(got["fs_ops_per_s"], 1),
            "ops_by_kind_per_s": got["ops_by_kind_per_s"],
            "listing_every_check_would_add_per_s": got["listing_every_check_would_add_per_s"],
            "read_opens_per_s": round(got["read_opens_per_s"], 1),
            "baseline_fs_ops_per_s": round(base["fs_ops_per_s"], 1),
            "ops_ratio_vs_baseline": round(got["fs_ops_per_s"] / base["fs_ops_per_s"], 3),
            "cpu_percent": round(got["cpu_percent"], 2),
            "baseline_cpu_percent": round(base["cpu_percent"], 2),
            "rss_mb": round(got["rss_mb"], 1),
            "active_p50_s": pct(lat["active"], 0.5),
            "active_p99_s": pct(lat["active"], 0.99),
            "quiet_p50_s": pct(lat["quiet"], 0.5),
            "quiet_p99_s": pct(lat["quiet"], 0.99),
            "injected": {k: len(v) for k, v in lat.items()},
            "missed": missed,
            "budget_covers_base_interval": load.covered,
            "demand_ops_per_s": round(load.demand_ops_per_s, 1),
            "plan_lag_s": round(load.lag_s, 2),
        }
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", default="10,100,500")
    ap.add_argument("--budget", type=float, default=100.0, help="watch.poll_budget_ops_per_s")
    ap.add_argument("--warmup", type=float, default=45.0, help="seconds before failure lines are injected")
    ap.add_argument("--measure", type=float, default=45.0)
    ap.add_argument("--writers", type=int, default=2, help="writer processes")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "active_runs.json"))
    args = ap.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(30))
    results = []
    for n in (int(x) for x in args.runs.split(",")):
        r = measure_n(n, args.budget, args.warmup, args.measure, args.writers)
        print(json.dumps(r), flush=True)
        results.append(r)
    summary = dict(results[-1])
    summary["load_average"] = os.getloadavg()
    summary["by_runs"] = results
    summary["goals"] = {
        "fs_ops_within_budget": all(r["fs_ops_per_s"] <= r["budget_ops_per_s"] for r in results),
        "cpu_under_5_percent_at_largest": results[-1]["cpu_percent"] < 5.0,
        "active_p99_under_2.3_s": {
            r["runs"]: r["active_p99_s"] is not None and r["active_p99_s"] < 2.3 for r in results
        },
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
