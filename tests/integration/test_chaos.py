"""Chaos: the daemon is SIGKILLed again and again while specs arrive and real jobs fail, resume and complete.

A seeded schedule (SHEPHERD_CHAOS_SEED to replay one) of >= 30 kills: most after a random delay (during
start-up, reconciliation, submission, tailing, deciding...), every third at a named crash point
(supervisor/faultpoints.py) so the awkward windows are hit on purpose. The daemon is restarted after each.
Every job's first attempt fails with a real failure signature (tests/support/fake_failure.py) and its second
completes. At the end, checked against the store, Slurm itself, the jobs' own records and the Slack stand-in:

- every spec became exactly one run, with one unbroken chain of attempts, and every run COMPLETED;
- no attempt was submitted twice (each `shep-<run>-a<n>` once in `squeue -t all`, each attempt ran once);
- every failure got exactly one acting decision, and every decision was carried out (non-empty outcome);
- every Slack message was delivered once (no repeated text in a thread) and each run's completion was said.

A parametrised companion kills once at each named point, deterministically, with one run.
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from supervisor.faultpoints import POINTS
from tests.support import specs
from tests.support.daemon import REPO, DaemonProcess, wait_for
from tests.support.specs import fake_argv, records
from tests.support.standin_thread import StandinThread

pytestmark = pytest.mark.slurm
PLAIN = REPO / "tests" / "support" / "plain.sub"
CHANNEL = "C0CHAOS"
SEED = int(os.environ.get("SHEPHERD_CHAOS_SEED", "20251121"))
KILLS = 32
KINDS = ("cuda-oom", "nccl", "preempted", "hf-cache", "cuda-oom", "nccl")
RESUMED_BY = {
    "cuda-oom": "cuda-oom",
    "nccl": "nccl-error",
    "preempted": "slurm-preempted",
    "hf-cache": "hf-cache-not-shared",
}
FINAL = {"COMPLETED", "FAILED", "GAVE_UP", "CANCELLED", "LOST"}


@pytest.fixture
def slack() -> Iterator[StandinThread]:
    s = StandinThread().start()
    yield s
    s.stop()


@pytest.fixture
def sup(tmp_path: Path, slurm_cluster: Any, slack: StandinThread) -> Iterator[DaemonProcess]:
    env = {
        **slurm_cluster.env,
        "SHEPHERD_LAUNCH_SCRIPT": str(PLAIN),
        "SHEPHERD_SLACK__MODE": "socket",
        "SHEPHERD_SLACK__BASE_URL": slack.standin.api_url,
        "SHEPHERD_SLACK__CHANNEL": CHANNEL,
        "SHEPHERD_SLACK__RETRY_INITIAL_S": "0.2",
        "SHEPHERD_SLACK__RETRY_MAX_S": "1",
        "SHEPHERD_SLACK__POLL_INTERVAL_S": "0.2",
        "SLACK_BOT_TOKEN": "xoxb-1111-2222-chaostoken",
        "SLACK_APP_TOKEN": "xapp-1-A0CHAOS-3333-chaosapptoken",
    }
    d = DaemonProcess(tmp_path / "root", env=env)
    yield d
    d.stop()
    # Leave nothing of ours running on the shared cluster.
    runs = [p.name for p in (d.root / "runs").glob("*")] if (d.root / "runs").is_dir() else []
    for job, name, _ in slurm_jobs(slurm_cluster.env):
        if any(name.startswith(f"shep-{r}-") for r in runs):
            subprocess.run(["scancel", job], env=slurm_cluster.env, capture_output=True)


def write_spec(tmp: Path, name: str, kind: str) -> Path:
    """Resubmission on purpose: the invariants count each attempt's own sbatch (`shep-<run>-a<n>` once in
    Slurm); a daemon killed while a runner waits is test_restart_in_place.py's."""
    argv = fake_argv(tmp, name, kind, "--sleep", "1")
    return specs.write_spec(tmp, name, argv, resume="in_place: false", shared_cache_dir=tmp / "shared-cache")


def slurm_jobs(env: dict[str, str]) -> list[tuple[str, str, str]]:
    """(job id, name, state) of every job slurmctld remembers (finished ones stay MinJobAge = 5 min)."""
    out = subprocess.run(
        ["squeue", "-h", "-t", "all", "-o", "%i|%j|%T"], env=env, capture_output=True, text=True, check=True
    ).stdout
    return [tuple(line.split("|", 2)) for line in out.splitlines() if line.count("|") == 2]  # type: ignore[misc]


def db(sup: DaemonProcess) -> sqlite3.Connection:
    con = sqlite3.connect(f"file:{sup.root / 'state' / 'shepherd.sqlite3'}?mode=ro", uri=True, timeout=10)
    con.row_factory = sqlite3.Row
    return con


def runs_by_name(sup: DaemonProcess) -> dict[str, list[sqlite3.Row]]:
    path = sup.root / "state" / "shepherd.sqlite3"
    if not path.exists():
        return {}
    with db(sup) as con:
        out: dict[str, list[sqlite3.Row]] = {}
        for r in con.execute("SELECT * FROM runs"):
            out.setdefault(r["name"], []).append(r)
        return out


def all_final(sup: DaemonProcess, names: list[str]) -> bool:
    runs = runs_by_name(sup)
    return all(n in runs and all(r["state"] in FINAL for r in runs[n]) for n in names)


def outbox_drained(sup: DaemonProcess) -> bool:
    with db(sup) as con:
        left = con.execute("SELECT COUNT(*) FROM slack_outbox WHERE sent_at IS NULL AND dead = 0").fetchone()
        return int(left[0]) == 0


def decisions_settled(sup: DaemonProcess) -> bool:
    with db(sup) as con:
        return con.execute("SELECT COUNT(*) FROM decisions WHERE outcome = ''").fetchone()[0] == 0


def check_invariants(
    sup: DaemonProcess,
    tmp: Path,
    names: list[str],
    kinds: dict[str, str],
    env: dict[str, str],
    slack: StandinThread,
) -> None:
    # A run's state commits before its decision's outcome and messages (a plot is drawn in between): settle.
    wait_for(lambda: decisions_settled(sup), 60, what="every decision's outcome")
    runs = runs_by_name(sup)
    jobs = slurm_jobs(env)
    with db(sup) as con:
        for name in names:
            assert len(runs.get(name, [])) == 1, f"spec {name} became {len(runs.get(name, []))} runs"
            run = runs[name][0]
            rid = run["id"]
            attempts = con.execute("SELECT * FROM attempts WHERE run_id = ? ORDER BY n", (rid,)).fetchall()
            decisions = con.execute("SELECT * FROM decisions WHERE run_id = ? ORDER BY id", (rid,)).fetchall()
            where = f"{name} ({rid}): {[dict(a) for a in attempts]}; decisions {[dict(d) for d in decisions]}"
            assert run["state"] == "COMPLETED", where
            # One unbroken chain: 1..k, only the last one open-ended, every earlier one settled.
            assert [a["n"] for a in attempts] == list(range(1, len(attempts) + 1)), where
            assert attempts[-1]["state"] == "ENDED" and attempts[-1]["slurm_state"] == "COMPLETED", where
            assert all(a["state"] in ("ENDED", "NEVER_SUBMITTED") for a in attempts), where
            # Slurm itself: each attempt's job name once, and only for attempts the store says were submitted.
            mine = Counter(j[1] for j in jobs if j[1].startswith(f"shep-{rid}-a"))
            assert all(c == 1 for c in mine.values()), f"submitted twice: {mine}; {where}"
            submitted = {f"shep-{rid}-a{a['n']}": a["job_id"] for a in attempts if a["state"] == "ENDED"}
            assert set(mine) == set(submitted), f"slurm {sorted(mine)} vs store {sorted(submitted)}; {where}"
            for job, jname, _ in jobs:
                if jname in submitted:
                    assert submitted[jname] == job, where
            # Each attempt ran once (the job's own record), and only the failing one was decided on.
            ran = [r["attempt"] for r in records(tmp, name)]
            assert sorted(ran) == sorted(set(ran)) == sorted(int(j.rsplit("-a", 1)[1]) for j in mine), where
            acting = [d for d in decisions if d["action"] != "none" and d["rule"] != "run-completed"]
            failed = [n for n in ran if n == 1]  # fake_failure fails its attempt 1 only
            assert len(acting) == len(failed), where
            for d in acting:
                assert d["rule"] == RESUMED_BY[kinds[name]] and d["attempt"] == 1, where
                assert "resuming" in d["outcome"], where
            assert all(d["outcome"] for d in decisions), f"a decision was never carried out: {where}"
            completed = [d for d in decisions if d["rule"] == "run-completed"]
            assert [d["attempt"] for d in completed] == [attempts[-1]["n"]], where
    # Slack: every message once. Group by thread (top-level posts on their own); no text twice in a group.
    wait_for(lambda: outbox_drained(sup), 60, what="the Slack outbox to drain")
    rec = slack.recorded()
    groups: dict[tuple[str, str], list[str]] = {}
    for m in rec.messages:
        groups.setdefault((m["channel"], m["thread_ts"] or m["ts"]), []).append(m["text"])
    for key, texts in groups.items():
        dupes = [t for t, c in Counter(texts).items() if c > 1]
        assert not dupes, f"delivered more than once in thread {key}: {dupes}"
    every = "\n".join(m["text"] or "" for m in rec.messages)
    for name in names:
        rid = runs[name][0]["id"]
        said = every.count(f"{rid}: completed.")
        assert said == 1, f"{rid}: its completion was said {said} times"


def test_sigkill_at_random_moments_loses_and_duplicates_nothing(
    sup: DaemonProcess, tmp_path: Path, slurm_cluster: Any, slack: StandinThread
) -> None:
    rng = random.Random(SEED)
    names = [f"chaos{i}-{kind}" for i, kind in enumerate(KINDS)]
    kinds = dict(zip(names, KINDS, strict=True))
    waiting = [write_spec(tmp_path, n, k) for n, k in kinds.items()]
    fired: Counter[str] = Counter()
    named = 0
    for i in range(KILLS):
        # Specs arrive at random moments (while the daemon is down or starting), all of them by half-time.
        while waiting and (rng.random() < 0.35 or i >= KILLS // 2):
            sup.submit(waiting.pop(0))
        if i % 3 == 2:
            point = POINTS[named % len(POINTS)]
            named += 1
            sup.start(extra_env={"SHEPHERD_CRASH_AT": point})
            try:
                assert sup.wait_exit(12) == -signal.SIGKILL
                fired[point] += 1
                sup.proc = None
            except subprocess.TimeoutExpired:
                sup.stop(signal.SIGKILL)  # the point was not reached this time: a random kill instead
        else:
            sup.start()
            time.sleep(rng.uniform(0.1, 4.0))
            sup.stop(signal.SIGKILL)
    print(f"chaos seed {SEED}: {KILLS} kills, named points reached: {dict(fired)}")
    sup.start()
    wait_for(lambda: all_final(sup, names), 150, 1.0, "every run to finish after the last restart")
    check_invariants(sup, tmp_path, names, kinds, slurm_cluster.env, slack)


@pytest.mark.parametrize("point", POINTS)
def test_a_kill_at_a_named_point_is_recovered_on_restart(
    sup: DaemonProcess, tmp_path: Path, slurm_cluster: Any, slack: StandinThread, point: str
) -> None:
    name = f"point-{point}"
    sup.start(extra_env={"SHEPHERD_CRASH_AT": point})
    sup.submit(write_spec(tmp_path, name, "cuda-oom"))
    assert sup.wait_exit(90) == -signal.SIGKILL, f"never reached {point}:\n{sup.log_text()[-3000:]}"
    sup.proc = None
    sup.start()
    wait_for(lambda: all_final(sup, [name]), 120, 0.5, f"{name} to finish after the restart")
    check_invariants(sup, tmp_path, [name], {name: "cuda-oom"}, slurm_cluster.env, slack)
