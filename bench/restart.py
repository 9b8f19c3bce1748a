"""How much faster is a restart in place than a resubmission? (issue 31)

On the real dev Slurm cluster, with Shepherd's own ray.sub and real Ray, one daemon supervises runs whose
driver (this file's `driver` mode) joins the job's Ray cluster, runs one Ray task (its "training step"),
and on its first attempt then fails with an NCCL error that the shipped `nccl-error` rule resumes at once
(backoff 0). Each trial times failure -> first new training step: from the failing driver's exit (stamped by
the driver itself just before it exits) to the resumed driver's first completed Ray task (stamped after
`ray.get`). Both modes run side by side in the same session, alternating, on the same cluster:

    in_place   resume.in_place: true: the runner runs the driver again inside the same Slurm job, on the
               Ray cluster that is still up (no scancel, no sbatch, no queue, no Ray start)
    resubmit   today's path: scancel, sbatch, wait for the old job to leave, queue (empty on the dev
               cluster: a dedicated reservation's best case), Ray start, driver start

    python bench/restart.py --trials 3          # needs SLURM_CONF (scripts/dev-cluster up) and .venv's ray

Last line: a JSON object with each mode's trials and p50 (seconds), the ratio resubmit/in_place of the
p50s, and whether it meets the goal (>= 3x). The dev cluster's queue wait is zero, so the ratio here is the
floor of what a shared cluster's queue would add to the resubmission.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

NCCL = (
    "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:317, "
    "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5"
)
GOAL = 3.0


def driver(record: Path) -> int:
    """The job's driver: join Ray, one task, stamp it; the first attempt then fails as NCCL would."""
    import ray

    attempt = int(os.environ.get("SHEPHERD_ATTEMPT", "1"))
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"), log_to_driver=False)

    @ray.remote
    def step() -> int:
        return 1

    ray.get(step.remote())
    with record.open("a") as f:
        f.write(json.dumps({"attempt": attempt, "step_at": time.time()}) + "\n")
    if attempt > 1:
        print("training finished", flush=True)
        return 0
    print("Traceback (most recent call last):", flush=True)
    print(NCCL, flush=True)
    with record.open("a") as f:
        f.write(json.dumps({"attempt": attempt, "failed_at": time.time()}) + "\n")
    return 1


def spec(tmp: Path, name: str, in_place: bool) -> Path:
    record = tmp / f"{name}.jsonl"
    command = [sys.executable, str(Path(__file__).resolve()), "driver", str(record)]
    lines = [
        f"name: {name}",
        f"command: {json.dumps(command)}",
        f"workdir: {tmp}",
        "slurm: {cpus: 2, time: '00:10:00'}",
        f"resume: {{backoff_s: 0, in_place: {str(in_place).lower()}, in_place_wait_s: 120}}",
    ]
    path = tmp / f"{name}.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def trial(sup: object, tmp: Path, name: str, in_place: bool) -> dict[str, object]:
    from tests.support.daemon import DaemonProcess

    assert isinstance(sup, DaemonProcess)
    run = sup.submit(spec(tmp, name, in_place))
    final = sup.wait_state(run, {"COMPLETED", "FAILED", "GAVE_UP", "CANCELLED"}, timeout=300)
    status = sup.status(run)
    if final["state"] != "COMPLETED":
        raise SystemExit(f"{name} ended {final['state']}: {json.dumps(status)[:2000]}")
    rows = [json.loads(line) for line in (tmp / f"{name}.jsonl").read_text().splitlines()]
    failed = [r["failed_at"] for r in rows if r["attempt"] == 1 and "failed_at" in r]
    resumed = [r["step_at"] for r in rows if r["attempt"] == 2 and "step_at" in r]
    jobs = [a["job_id"] for a in status["attempt_list"]]
    if not failed or not resumed:  # counted apart, never timed: the summary says how many
        return {"seconds": None, "jobs": jobs, "records": rows, "decisions": status.get("decisions")}
    return {"seconds": round(resumed[0] - failed[0], 2), "jobs": jobs, "same_job": len(set(jobs)) == 1}


def main() -> int:
    if len(sys.argv) == 3 and sys.argv[1] == "driver":
        return driver(Path(sys.argv[2]))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=3, help="per mode (default 3)")
    ap.add_argument("--out", type=Path, help="also write the summary here (e.g. bench/results/restart.json)")
    ap.add_argument("--keep", action="store_true", help="keep the working folder (the daemon's root, logs)")
    args = ap.parse_args()
    if not os.environ.get("SLURM_CONF"):
        raise SystemExit("SLURM_CONF is not set: bring the dev cluster up (scripts/dev-cluster up) first")
    from tests.support.daemon import DaemonProcess

    venv_bin = REPO / ".venv" / "bin"
    env = {"PATH": f"{venv_bin}:{os.environ['PATH']}"}
    times: dict[str, list[dict[str, object]]] = {"in_place": [], "resubmit": []}
    tmp = Path(tempfile.mkdtemp(prefix="bench-restart-"))
    print(f"working in {tmp}", file=sys.stderr)
    sup = DaemonProcess(tmp / "root", env=env)
    sup.start()
    try:
        for i in range(args.trials):
            for mode in ("in_place", "resubmit"):
                t = trial(sup, tmp, f"{mode.replace('_', '-')}-{i}", mode == "in_place")
                times[mode].append(t)
                print(f"{mode} trial {i + 1}: {t['seconds']} s (jobs {t['jobs']})", file=sys.stderr)
    finally:
        sup.stop()
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    timed = {m: [float(str(t["seconds"])) for t in ts if t["seconds"] is not None] for m, ts in times.items()}
    if not timed["in_place"] or not timed["resubmit"]:
        raise SystemExit(f"no trial was timed: {json.dumps(times)[:3000]}")
    p50 = {m: statistics.median(v) for m, v in timed.items()}
    ratio = p50["resubmit"] / p50["in_place"] if p50["in_place"] > 0 else float("inf")
    summary = {
        "in_place": {"p50_s": round(p50["in_place"], 2), "trials": times["in_place"]},
        "resubmit": {"p50_s": round(p50["resubmit"], 2), "trials": times["resubmit"]},
        "ratio": round(ratio, 2),
        "goal": GOAL,
        "untimed_trials": {m: sum(t["seconds"] is None for t in ts) for m, ts in times.items()},
        "met": ratio >= GOAL and all(t.get("same_job", True) for t in times["in_place"]),
        "measured": "failure (driver's own stamp at exit) -> first Ray task of the resumed driver",
    }
    if args.out:
        args.out.write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
