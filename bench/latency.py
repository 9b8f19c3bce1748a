"""Detection latency: a failure line appended to a running job's log -> the decision and the alert.

Runs the real daemon in-process (`build` in a temp root, on the dev Slurm cluster: SLURM_CONF must
point at it) once per watch mode, inotify and polling (`settings.watch.force_polling`). In each mode:

* alert trials (--trials, default 60): one run whose job sleeps, launched with tests/support/plain.sub
  (ray.sub's log layout without Ray). Each trial appends a fresh real CUDA OOM line to
  `<log_dir>/<jobid>-logs/ray-driver.log`, carrying a unique lowercase token the rule uses as its
  signature, and a rules file whose only rule alerts (no resume) with `incident_window: 0`, so every
  trial is a new decision on the same job. Measured: append (after write returns) -> the decision row's
  `at` (committed in SQLite) and -> the alert reaching the event sink (what Slack would get). Between trials
  a random pause of up to one poll interval, so polling trials land at every phase of the poll cycle.
* resume trials (--resume-trials, default 5): a fresh run each, the shipped rules; one appended OOM line
  fires `cuda-oom`. Measured: append -> the resume decision row, -> the run in BACKOFF, and -> the next
  attempt's intent (written just before its `sbatch`). That last one also waits for Slurm to confirm the
  cancelled job is gone (the scheduler never runs two attempts of a run at once), i.e. the Slurm poll.

Prints a table, writes bench/results/latency.json; the LAST line is a JSON object with inotify_p50_s,
inotify_p99_s, polling_p50_s, polling_p99_s (alert trials) and poll_interval_s.
Usage: SLURM_CONF=... .venv/bin/python bench/latency.py [--trials 60] [--resume-trials 5] [--modes both]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import statistics
import string
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import anyio
import structlog

from supervisor.daemon.compose import build
from supervisor.daemon.loops import Daemon
from supervisor.daemon.monitor import Monitor
from supervisor.domain.notices import Notice
from supervisor.domain.runs import AttemptState, RunState
from supervisor.intake.queue import new_run_id
from supervisor.settings import Settings, SlurmSettings, WatchSettings

REPO = Path(__file__).resolve().parents[1]
PLAIN = REPO / "tests" / "support" / "plain.sub"
RESULTS = Path(__file__).resolve().parent / "results" / "latency.json"
OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
ALERT_RULES = r"""
incident_window: 0s
rules:
  - name: bench-oom-alert
    description: GPU out of memory (benchmark rule; alerts only)
    priority: 80
    category: failure
    signature_group: 1
    trigger: {kind: log, regex: 'torch\.OutOfMemoryError: CUDA out of memory.*\(trial ([a-z]+)\)'}
    actions:
      - alert: {level: warning, message: "{run}: {excerpt}"}
"""


class Sink:
    """Records when each alert reaches the notifier (the daemon's last step before Slack)."""

    def __init__(self) -> None:
        self.seen: dict[str, float] = {}
        self.waiters: dict[str, anyio.Event] = {}

    def publish(self, event: Notice) -> None:
        now = time.time()
        for key in list(self.waiters):
            if key in (event.title or "") or key in (event.excerpt or "") or key == event.run_id:
                self.seen.setdefault(key, now)
                self.waiters.pop(key).set()

    def publish_plot(self, run_id: str, png: str, title: str) -> None:
        pass

    def expect(self, key: str) -> anyio.Event:
        ev = anyio.Event()
        self.waiters[key] = ev
        return ev


def pct(values: list[float], q: float) -> float:
    """Nearest-rank percentile (with fewer than 100 samples, p99 is the largest)."""
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q / 100 * len(s) + 0.5) - 1))]


def summary(values: list[float]) -> dict[str, float | int]:
    if not values:
        return {"n": 0}
    return {
        "n": len(values),
        "p50_s": round(statistics.median(values), 4),
        "p90_s": round(pct(values, 90), 4),
        "p99_s": round(pct(values, 99), 4),
        "max_s": round(max(values), 4),
        "mean_s": round(statistics.fmean(values), 4),
    }


async def wait_until(pred: Callable[[], Any], limit_s: float, what: str, step: float = 0.01) -> Any:
    with anyio.fail_after(limit_s):
        while True:
            got = pred()
            if got:
                return got
            await anyio.sleep(step)
    raise AssertionError(what)  # pragma: no cover


def write_spec(settings: Settings, tmp: Path, name: str, rules: Path | None) -> str:
    lines = [
        f"name: {name}",
        'command: ["sleep", "900"]',
        f"workdir: {tmp}",
        f"log_dir: {tmp / name / 'logs'}",
        "slurm: {cpus: 1, time: '00:20:00'}",
        "resume: {backoff_s: 0}",
    ]
    if rules is not None:
        lines.append(f"rules: {{files: [{rules}], use_default: false}}")
    run_id = new_run_id(name, time.time())
    tmp_file = settings.queue_dir / f".{run_id}.tmp"
    tmp_file.write_text("\n".join(lines) + "\n")
    os.replace(tmp_file, settings.queue_dir / f"{run_id}.yaml")
    return run_id


async def running_log(daemon: Daemon, monitor: Monitor, run_id: str, tmp: Path, name: str) -> Path:
    """Wait for the run's job to run and its driver log to be watched; returns the log path."""

    def ready() -> Path | None:
        a = daemon.store.latest_attempt(run_id)
        if a is None or a.job_id is None or a.slurm_state != "RUNNING":
            return None
        log = tmp / name / "logs" / f"{a.job_id}-logs" / "ray-driver.log"
        return log if log.exists() and str(log) in monitor.changes.paths else None

    path: Path = await wait_until(ready, 120, f"{run_id} running with a watched driver log", 0.05)
    return path


def append(path: Path, line: str) -> float:
    with path.open("a") as fh:
        fh.write(line + "\n")
    return time.time()


def decision_at(daemon: Daemon, run_id: str, token: str) -> float | None:
    for d in reversed(daemon.store.decisions(run_id)):
        if d.signature.endswith(token):
            return d.at
    return None


async def alert_trials(
    daemon: Daemon, monitor: Monitor, sink: Sink, tmp: Path, settings: Settings, n: int, jitter_s: float
) -> dict[str, list[float]]:
    rules = tmp / "alert-rules.yaml"
    rules.write_text(ALERT_RULES)
    name = "lat-alert"
    run_id = write_spec(settings, tmp, name, rules)
    log = await running_log(daemon, monitor, run_id, tmp, name)
    rng = random.Random(7)
    out: dict[str, list[float]] = {"decision": [], "alert": []}
    for i in range(n + 1):  # trial 0 warms up (first read of the file, caches)
        token = "".join(rng.choice(string.ascii_lowercase) for _ in range(10))
        done = sink.expect(token)
        t0 = append(log, f"{OOM} (trial {token})")
        with anyio.fail_after(30):
            await done.wait()
        dec = await wait_until(partial(decision_at, daemon, run_id, token), 10, "decision row")
        if i:
            out["alert"].append(sink.seen[token] - t0)
            out["decision"].append(dec - t0)
        await anyio.sleep(rng.uniform(0.02, jitter_s))
    await cancel_run(daemon, run_id)
    return out


async def resume_trials(
    daemon: Daemon, monitor: Monitor, sink: Sink, tmp: Path, settings: Settings, n: int
) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {"decision": [], "backoff": [], "next_intent": []}
    for i in range(n):
        name = f"lat-resume-{i}"
        run_id = write_spec(settings, tmp, name, None)
        log = await running_log(daemon, monitor, run_id, tmp, name)
        await anyio.sleep(0.3)
        t0 = append(log, OOM)
        dec = await wait_until(partial(rule_decided_at, daemon, run_id, "cuda-oom"), 30, "resume decision")
        backoff = await wait_until(partial(event_at, daemon, run_id, "resume-scheduled"), 30, "BACKOFF")
        nxt = await wait_until(partial(intent_at, daemon, run_id, 2), 60, "next attempt")
        out["decision"].append(dec - t0)
        out["backoff"].append(backoff - t0)
        out["next_intent"].append(nxt - t0)
        await wait_until(partial(submitted, daemon, run_id, 2), 60, "second sbatch")
        await cancel_run(daemon, run_id)
    return out


def rule_decided_at(daemon: Daemon, run_id: str, rule: str) -> float | None:
    return next((d.at for d in daemon.store.decisions(run_id) if d.rule == rule), None)


def event_at(daemon: Daemon, run_id: str, kind: str) -> float | None:
    return next((e.at for e in daemon.store.events(run_id) if e.kind == kind), None)


def intent_at(daemon: Daemon, run_id: str, n: int) -> float | None:
    a = daemon.store.get_attempt(run_id, n)
    return a.intent_at if a else None


def submitted(daemon: Daemon, run_id: str, n: int) -> bool:
    a = daemon.store.get_attempt(run_id, n)
    return a is not None and a.state != AttemptState.INTENT


async def cancel_run(daemon: Daemon, run_id: str) -> None:
    daemon.store.set_run_state(run_id, RunState.CANCELLED, reason="benchmark over")
    for a in daemon.store.attempts(run_id):
        if a.job_id and a.ended_at is None:
            try:
                await daemon.slurm.cancel(a.job_id)
            except Exception as exc:  # the job may be gone already
                print(f"scancel {a.job_id}: {exc}", file=sys.stderr)


async def one_mode(mode: str, args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix=f"shepherd-lat-{mode}-") as td:
        tmp = Path(td)
        settings = Settings(
            root=tmp / "root",
            launch_script=PLAIN,
            python=Path(sys.executable),
            watch=WatchSettings(force_polling=mode == "polling", poll_interval_s=args.poll_interval),
            slurm=SlurmSettings(
                poll_interval_s=1, steady_poll_interval_s=2, idle_poll_interval_s=2, command_timeout_s=15
            ),
        )
        sink = Sink()
        built = build(settings, sinks=[sink])
        daemon, monitor = built.daemon, built.monitor
        result: dict[str, Any] = {}
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(partial(daemon.run, extra_tasks=[monitor.run]))
                await daemon.ready.wait()
                jitter = args.poll_interval if mode == "polling" else 0.2
                result["alert"] = await alert_trials(
                    daemon, monitor, sink, tmp, settings, args.trials, jitter
                )
                if args.resume_trials:
                    result["resume"] = await resume_trials(
                        daemon, monitor, sink, tmp, settings, args.resume_trials
                    )
                tg.cancel_scope.cancel()
        finally:
            daemon.store.close()
        return result


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--trials", type=int, default=60)
    p.add_argument("--resume-trials", type=int, default=5)
    p.add_argument("--poll-interval", type=float, default=WatchSettings().poll_interval_s)
    p.add_argument("--modes", choices=["both", "inotify", "polling"], default="both")
    p.add_argument("--no-save", action="store_true")
    args = p.parse_args()
    if not os.environ.get("SLURM_CONF"):
        print("set SLURM_CONF to the dev cluster's slurm.conf (scripts/dev-cluster up)", file=sys.stderr)
        return 2
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR))
    modes = ["inotify", "polling"] if args.modes == "both" else [args.modes]
    raw = {m: anyio.run(one_mode, m, args) for m in modes}
    res: dict[str, Any] = {
        "poll_interval_s": args.poll_interval,
        "trials": args.trials,
        "resume_trials": args.resume_trials,
        "modes": {},
    }
    print(f"{'mode':<9}{'measured':<34}{'n':>4}{'p50 s':>9}{'p90 s':>9}{'p99 s':>9}{'max s':>9}")
    for m, r in raw.items():
        res["modes"][m] = {}
        for group, series in r.items():
            for what, vals in series.items():
                s = summary(vals)
                res["modes"][m][f"{group}:{what}"] = s
                label = f"{group}: line -> {what}"
                print(
                    f"{m:<9}{label:<34}{s['n']:>4}{s.get('p50_s', '-'):>9}{s.get('p90_s', '-'):>9}"
                    f"{s.get('p99_s', '-'):>9}{s.get('max_s', '-'):>9}"
                )
    last: dict[str, Any] = {"poll_interval_s": args.poll_interval}
    for m in modes:
        a = res["modes"][m]["alert:alert"]
        last[f"{m}_p50_s"] = a["p50_s"]
        last[f"{m}_p99_s"] = a["p99_s"]
        if "resume:decision" in res["modes"][m]:
            last[f"{m}_resume_decision_p50_s"] = res["modes"][m]["resume:decision"]["p50_s"]
    last["targets_met"] = all(
        [last.get("inotify_p50_s", 0) < 0.3, last.get("polling_p50_s", 0) < args.poll_interval + 0.3]
    )
    res["summary"] = last
    if not args.no_save:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(res, indent=2) + "\n")
    print(json.dumps(last))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
