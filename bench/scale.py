"""How much does tracking N runs cost Slurm and the login node?

Submits N held jobs through the daemon's own submission path against the real
dev slurmctld, then lets the real poll loop track them and counts Slurm
commands per poll and per minute, the daemon's RSS and its CPU share.
The figure that matters: Slurm calls per poll must not grow with N.

Also, without slurmdbd, the cost of a lost-intent lookup against a jobcomp file of --jobcomp-records
records (default 100k): the old way (`sacct -c --name X`, which ignores --name and prints every record, then
parsing all of it) is the baseline, measured in the same run, against the incremental reader (first lookup
reads the file once, later ones only what was appended).

    python bench/scale.py --jobs 1,100,1000     # needs SLURM_CONF (scripts/dev-cluster up)
    python bench/scale.py --jobs ''             # only the jobcomp lookup

Last line: a JSON object with jobs, slurm_calls_per_poll, slurm_calls_per_minute, rss_mb, cpu_percent
(for the largest N), a per-N table, and "jobcomp" (baseline and reader seconds per lookup, their ratio).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import resource
import statistics
import subprocess
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
from supervisor.slurm.jobcomp import JobcompReader
from supervisor.slurm.parse import SACCT_FIELDS, parse_sacct
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


JOBCOMP_RECORD = (
    "JobId={id} UserId=u(1000) GroupId=u(1000) Name={name} JobState={state} Partition=debug TimeLimit=60 "
    "StartTime=2026-11-24T01:00:00 EndTime=2026-11-24T01:10:00 NodeList=node1 NodeCnt=1 ProcCnt=1 "
    "WorkDir=/home/u ReservationName= Tres=cpu=1,mem=1000M,node=1 Account= QOS= WcKey= Cluster=c "
    "SubmitTime=2026-11-24T00:59:00 EligibleTime=2026-11-24T00:59:00 DerivedExitCode=0:0 ExitCode={code}\n"
)


def jobcomp_lines(first: int, n: int) -> str:
    """`n` records, one in 100 of them ours (shep-<run>-a1), the rest other people's jobs."""
    return "".join(
        JOBCOMP_RECORD.format(
            id=first + i,
            name=f"shep-bench{first + i}-a1" if i % 100 == 0 else f"someone-{first + i}",
            state="COMPLETED" if i % 7 else "FAILED",
            code="0:0" if i % 7 else "1:0",
        )
        for i in range(n)
    )


def measure_jobcomp(records: int, repeats: int) -> dict[str, float]:
    """Seconds per lost-intent lookup against a jobcomp file of `records` records: `sacct -c` (the baseline,
    as the client asked before) and the incremental reader, cold (first lookup) and warm (after 10 more)."""
    with tempfile.TemporaryDirectory(prefix="shepherd-jobcomp-") as tmp:
        path = Path(tmp) / "jobcomp.txt"
        path.write_text(jobcomp_lines(1, records))
        name = f"shep-bench{records - 99 if records > 99 else 1}-a1"
        argv = ["sacct", "-c", "-f", str(path), "-P", "-n", "-X", "-o", ",".join(SACCT_FIELDS)]
        argv += ["--name", name, "-S", "now-7days", "-E", "now"]
        baseline = []
        for _ in range(repeats):
            t = time.perf_counter()
            out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
            found = [o for o in parse_sacct(out)[0] if o.name == name]
            baseline.append(time.perf_counter() - t)
            assert found, f"sacct -c did not find {name}"
        lines_printed = len(out.splitlines())
        reader = JobcompReader(path)
        t = time.perf_counter()
        assert reader.lookup([name])
        cold = time.perf_counter() - t
        warm = []
        next_id = records + 1
        for _ in range(repeats):
            with path.open("a") as fh:
                fh.write(jobcomp_lines(next_id, 10))
            t = time.perf_counter()
            assert reader.lookup([f"shep-bench{next_id}-a1"])
            warm.append(time.perf_counter() - t)
            next_id += 10
    base, hot = statistics.median(baseline), statistics.median(warm)
    return {
        "records": records,
        "sacct_lines_printed": lines_printed,
        "baseline_sacct_c_s": round(base, 4),
        "reader_first_lookup_s": round(cold, 4),
        "reader_next_lookup_s": round(hot, 6),
        "speedup_next_lookup": round(base / hot, 1),
        "speedup_first_lookup": round(base / cold, 2),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", default="1,100,1000")
    ap.add_argument("--polls", type=int, default=6)
    ap.add_argument("--interval", type=float, default=2.0)
    ap.add_argument("--jobcomp-records", type=int, default=100_000)
    ap.add_argument("--jobcomp-repeats", type=int, default=5)
    args = ap.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    if "SLURM_CONF" not in os.environ:
        print("set SLURM_CONF (scripts/dev-cluster up prints it)", file=sys.stderr)
        return 2
    results = []
    for n in (int(x) for x in args.jobs.split(",") if x.strip()):
        with tempfile.TemporaryDirectory(prefix="shepherd-scale-") as tmp:
            r = anyio.run(measure, n, args.polls, args.interval, Path(tmp))
        results.append(r)
        print(
            f"{r['jobs']:>6} jobs: {r['slurm_calls_per_poll']:>5} Slurm calls/poll, "
            f"{r['slurm_calls_per_minute']:>6} calls/min, RSS {r['rss_mb']} MB, CPU {r['cpu_percent']}%, "
            f"submitted in {r['submit_s']} s",
            flush=True,
        )
    jobcomp = measure_jobcomp(args.jobcomp_records, args.jobcomp_repeats) if args.jobcomp_records else None
    if jobcomp:
        j = jobcomp
        print(
            f"lost-intent lookup, jobcomp of {j['records']} records: sacct -c {j['baseline_sacct_c_s']} s"
            f" ({j['sacct_lines_printed']} lines printed), reader first {j['reader_first_lookup_s']} s,"
            f" next {j['reader_next_lookup_s']} s ({j['speedup_next_lookup']}x)",
            flush=True,
        )
    out_dir = Path(__file__).parent / "results"
    out_dir.mkdir(exist_ok=True)
    out = out_dir / "scale.json"
    if results:
        summary = dict(results[-1])
        summary["by_jobs"] = results
        summary["calls_per_poll_grows_with_jobs"] = (
            results[-1]["slurm_calls_per_poll"] > results[0]["slurm_calls_per_poll"]
        )
    else:  # only the jobcomp lookup: the jobs part of the last full run stays
        summary = json.loads(out.read_text()) if out.exists() else {}
    if jobcomp:
        summary["jobcomp"] = jobcomp
    out.write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
