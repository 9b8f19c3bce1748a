"""How much does tracking N runs cost Slurm and the login node?

Submits N held jobs through the daemon's own submission path against the real
dev slurmctld, then lets the real poll loop track them and counts Slurm
commands per poll and per minute, the daemon's RSS and its CPU share.
The figure that matters: Slurm calls per poll must not grow with N.

    python bench/scale.py --jobs 1,100,1000     # needs SLURM_CONF (scripts/dev-cluster up)

Last line: a JSON object with jobs, slurm_calls_per_poll, slurm_calls_per_minute, rss_mb, cpu_percent
(for the largest N) and a per-N table.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

import anyio
import structlog

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from supervisor.daemon.compose import build
from supervisor.settings import Settings
from supervisor.slurm.client import SlurmClient
from supervisor.store import Store

SPEC = """name: {name}
command: ["sleep", "600"]
workdir: {workdir}
slurm:
  cpus: 1
  time: "00:10:00"
  extra_args: ["--hold"]
"""


def rss_mb() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def measure(n: int, polls: int, interval: float, root: Path) -> dict[str, float]:
    settings = Settings(root=root)
    settings.slurm.poll_interval_s = interval
    settings.slurm.steady_poll_interval_s = interval
    settings.preflight.at_intake = False  # measures supervision, not preflight's sbatch --test-only
    settings.ensure_dirs()
    store = Store(settings.db_path)
    slurm = SlurmClient(timeout_s=60)
    daemon = build(settings, store=store, slurm=slurm).daemon
    for i in range(n):
        (settings.queue_dir / f"scale-{i:05d}.yaml").write_text(
            SPEC.format(name=f"scale-{i:05d}", workdir=root)
        )
    await anyio.sleep(settings.spec_settle_s + 0.05)
    await daemon.scan_queue()
    t0 = time.monotonic()
    for run in store.list_runs(include_final=False):
        await daemon.submit_attempt(run)
    submit_s = time.monotonic() - t0
    await daemon.poll_once()  # settle every job's first observation
    before = dict(slurm.stats.calls)
    cpu0 = time.process_time()
    w0 = time.monotonic()
    for _ in range(polls):
        await daemon.poll_once()
        await anyio.sleep(interval)
    wall = time.monotonic() - w0
    cpu = time.process_time() - cpu0
    calls = sum(slurm.stats.calls.values()) - sum(before.values())
    job_ids = [a.job_id for a in store.open_attempts() if a.job_id]
    tracked = len(job_ids)
    store.close()
    for i in range(0, len(job_ids), 200):  # only our own jobs, in a few calls
        await anyio.run_process(["scancel", *job_ids[i : i + 200]], check=False)
    return {
        "jobs": n,
        "tracked": tracked,
        "submit_s": round(submit_s, 1),
        "slurm_calls_per_poll": round(calls / polls, 2),
        "slurm_calls_per_minute": round(calls / wall * 60, 1),
        "rss_mb": round(rss_mb(), 1),
        "cpu_percent": round(100 * cpu / wall, 2),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", default="1,100,1000")
    ap.add_argument("--polls", type=int, default=6)
    ap.add_argument("--interval", type=float, default=2.0)
    args = ap.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    if "SLURM_CONF" not in os.environ:
        print("set SLURM_CONF (scripts/dev-cluster up prints it)", file=sys.stderr)
        return 2
    results = []
    for n in (int(x) for x in args.jobs.split(",")):
        with tempfile.TemporaryDirectory(prefix="shepherd-scale-") as tmp:
            r = anyio.run(measure, n, args.polls, args.interval, Path(tmp))
        results.append(r)
        print(
            f"{r['jobs']:>6} jobs: {r['slurm_calls_per_poll']:>5} Slurm calls/poll, "
            f"{r['slurm_calls_per_minute']:>6} calls/min, RSS {r['rss_mb']} MB, CPU {r['cpu_percent']}%, "
            f"submitted in {r['submit_s']} s",
            flush=True,
        )
    out_dir = Path(__file__).parent / "results"
    out_dir.mkdir(exist_ok=True)
    summary = dict(results[-1])
    summary["by_jobs"] = results
    summary["calls_per_poll_grows_with_jobs"] = (
        results[-1]["slurm_calls_per_poll"] > results[0]["slurm_calls_per_poll"]
    )
    (out_dir / "scale.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
