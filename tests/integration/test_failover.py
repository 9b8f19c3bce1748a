"""Two daemons on one root: the leader is frozen (SIGSTOP), the standby takes over and carries on every run,
the old leader is thawed (SIGCONT) and steps down without acting. Seeded trials on the real dev Slurm cluster.

Both daemons run on this machine with their own pids (one "host" each would need nothing more: the lease names
host and pid, and never compares clocks). The trials are short on purpose: a 4 s lease renewed every 0.5 s,
half-second polls, jobs of a second or two, so 20+ trials fit in a few minutes. Specs arrive between freezes;
every run's first attempt fails with a real signature and is resumed, its second completes. At the end:

- 0 lost runs: every spec became exactly one run, COMPLETED, with one unbroken chain of attempts;
- 0 duplicate submissions: each attempt's job name once in `squeue -t all`, each attempt ran once (the job's
  own record), and each job's tag carries the generation the store recorded for its attempt;
- every thawed leader exited 75 ("stepped down") and its log shows no claim, submission or cancel after the
  freeze; the lease's generation went up by one per takeover.

And a person's `shepherd cancel`, given while the leader is frozen, is carried out by the new leader alone.
"""

from __future__ import annotations

import json
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

from supervisor.lease.keeper import read_lease
from tests.support import specs
from tests.support.daemon import REPO, SHEPHERD, DaemonProcess, wait_for
from tests.support.specs import fake_argv, records

pytestmark = pytest.mark.slurm
PLAIN = REPO / "tests" / "support" / "plain.sub"
SEED = int(os.environ.get("SHEPHERD_FAILOVER_SEED", "20261123"))
TRIALS = int(os.environ.get("SHEPHERD_FAILOVER_TRIALS", "20"))
KINDS = ("cuda-oom", "nccl", "preempted", "hf-cache")
FAST = {
    "SHEPHERD_LEASE__TTL_S": "4",
    "SHEPHERD_LEASE__RENEW_EVERY_S": "0.5",
    "SHEPHERD_LEASE__MARGIN_S": "1",
    "SHEPHERD_SLURM__COMMAND_TIMEOUT_S": "2.5",
    "SHEPHERD_SLURM__POLL_INTERVAL_S": "0.5",
    "SHEPHERD_SLURM__STEADY_POLL_INTERVAL_S": "1",
    "SHEPHERD_SLURM__IDLE_POLL_INTERVAL_S": "1",
    "SHEPHERD_LAUNCH_SCRIPT": str(PLAIN),
}
ACTING = ('"event": "submitted"', '"event": "spec claimed"', "cancelled job", '"event": "lease acquired"')


class Daemon(DaemonProcess):
    """A DaemonProcess with its own log file, so two can share a root."""

    def __init__(self, root: Path, name: str, env: dict[str, str]) -> None:
        super().__init__(root, env=env)
        self.log_path = root / f"daemon-{name}.log"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid


@pytest.fixture
def pair(tmp_path: Path, slurm_cluster: Any) -> Iterator[tuple[Daemon, Daemon]]:
    root = tmp_path / "root"
    root.mkdir()
    env = {**slurm_cluster.env, **FAST}
    a, b = Daemon(root, "a", env), Daemon(root, "b", env)
    yield a, b
    for d in (a, b):
        if d.proc is not None:
            d.proc.send_signal(signal.SIGCONT)
        d.stop(signal.SIGKILL)
    runs = [p.name for p in (root / "runs").glob("*")] if (root / "runs").is_dir() else []
    for job, name, _, _ in slurm_jobs(slurm_cluster.env):
        if any(name.startswith(f"shep-{r}-") for r in runs):
            subprocess.run(["scancel", job], env=slurm_cluster.env, capture_output=True)


def slurm_jobs(env: dict[str, str]) -> list[tuple[str, str, str, str]]:
    """(job id, name, state, comment) of every job slurmctld remembers (finished ones for MinJobAge)."""
    out = subprocess.run(
        ["squeue", "-h", "-t", "all", "-o", "%i|%j|%T|%k"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [tuple(line.split("|", 3)) for line in out.splitlines() if line.count("|") == 3]  # type: ignore[misc]


def holder(root: Path) -> tuple[int, int] | None:
    rec = read_lease(root / "state" / "lease")
    return (rec.pid, rec.generation) if rec is not None and not rec.released else None


def db(root: Path) -> sqlite3.Connection:
    con = sqlite3.connect(f"file:{root / 'state' / 'shepherd.sqlite3'}?mode=ro", uri=True, timeout=10)
    con.row_factory = sqlite3.Row
    return con


def runs_by_name(root: Path) -> dict[str, list[sqlite3.Row]]:
    if not (root / "state" / "shepherd.sqlite3").exists():
        return {}
    with db(root) as con:
        out: dict[str, list[sqlite3.Row]] = {}
        for r in con.execute("SELECT * FROM runs"):
            out.setdefault(r["name"], []).append(r)
        return out


def test_a_frozen_leader_is_replaced_and_steps_down_when_thawed_without_losing_or_duplicating_anything(
    pair: tuple[Daemon, Daemon], tmp_path: Path, slurm_cluster: Any
) -> None:
    rng = random.Random(SEED)
    leader, standby = pair
    root = leader.root
    names = [f"fo{i}-{KINDS[i % len(KINDS)]}" for i in range(8)]
    waiting = []
    for i, name in enumerate(names):
        argv = fake_argv(tmp_path, name, KINDS[i % len(KINDS)], "--sleep", "1")
        # Resubmission on purpose: what is checked is each attempt's own sbatch, fenced by the lease.
        waiting.append(
            specs.write_spec(
                tmp_path, name, argv, resume="in_place: false", shared_cache_dir=tmp_path / "shared-cache"
            )
        )
    leader.start()
    wait_for(lambda: holder(root) == (leader.pid, 1), 60, 0.2, "the first daemon to take the lease")
    standby.start()
    generation = 1
    stepped_down = 0
    for trial in range(TRIALS):
        while waiting and (rng.random() < 0.5 or trial >= TRIALS // 2):
            leader.submit(waiting.pop(0))
        time.sleep(rng.uniform(0.1, 2.0))  # let the leader claim, submit, poll, decide...
        offset = leader.log_path.stat().st_size
        leader.proc.send_signal(signal.SIGSTOP)  # type: ignore[union-attr]
        new = wait_for(
            lambda want=standby.pid: (h := holder(root)) is not None and h[0] == want and h,
            30,
            0.1,
            f"trial {trial}: the standby to take over from a frozen leader",
        )
        assert new[1] == generation + 1, f"trial {trial}: generation {new[1]} after {generation}"
        generation = new[1]
        time.sleep(rng.uniform(0.0, 1.5))  # the new leader carries on while the old one is frozen
        leader.proc.send_signal(signal.SIGCONT)  # type: ignore[union-attr]
        code = leader.wait_exit(20)
        after = leader.log_path.read_text(errors="replace")[offset:]
        assert code == 75, f"trial {trial}: the thawed leader exited {code}:\n{after[-3000:]}"
        assert "lease lost" in after, after[-3000:]
        acted = [line for line in after.splitlines() if any(a in line for a in ACTING)]
        assert acted == [], f"trial {trial}: the thawed leader acted: {acted}"
        stepped_down += 1
        leader.proc = None
        leader.start()  # back as the standby
        leader, standby = standby, leader
    print(f"failover seed {SEED}: {TRIALS} trials, {stepped_down} step-downs, generation {generation}")
    while waiting:
        leader.submit(waiting.pop(0))
    final = {"COMPLETED", "FAILED", "GAVE_UP", "CANCELLED", "LOST"}
    wait_for(
        lambda: all(n in (r := runs_by_name(root)) and all(x["state"] in final for x in r[n]) for n in names),
        180,
        1.0,
        "every run to finish",
    )
    check_nothing_lost_or_duplicated(root, tmp_path, names, slurm_cluster.env)


def check_nothing_lost_or_duplicated(root: Path, tmp: Path, names: list[str], env: dict[str, str]) -> None:
    runs = runs_by_name(root)
    jobs = slurm_jobs(env)
    with db(root) as con:
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        for name in names:
            assert len(runs.get(name, [])) == 1, f"spec {name} became {len(runs.get(name, []))} runs"
            run = runs[name][0]
            rid = run["id"]
            attempts = con.execute("SELECT * FROM attempts WHERE run_id = ? ORDER BY n", (rid,)).fetchall()
            where = f"{name} ({rid}): {json.dumps([dict(a) for a in attempts], default=str)}"
            assert run["state"] == "COMPLETED", where
            assert [a["n"] for a in attempts] == list(range(1, len(attempts) + 1)), where
            assert all(a["state"] in ("ENDED", "NEVER_SUBMITTED") for a in attempts), where
            mine = Counter(j[1] for j in jobs if j[1].startswith(f"shep-{rid}-a"))
            assert all(c == 1 for c in mine.values()), f"submitted twice: {mine}; {where}"
            submitted = {f"shep-{rid}-a{a['n']}": a for a in attempts if a["state"] == "ENDED"}
            assert set(mine) == set(submitted), f"slurm {sorted(mine)} vs store {sorted(submitted)}; {where}"
            for job, jname, _, comment in jobs:
                if jname in submitted:
                    a = submitted[jname]
                    assert a["job_id"] == job, where
                    assert comment.endswith(f":gen={a['generation']}"), f"{comment} vs {where}"
            ran = [r["attempt"] for r in records(tmp, name)]
            assert sorted(ran) == sorted(set(ran)) == sorted(int(j.rsplit("-a", 1)[1]) for j in mine), where


def test_a_command_given_while_the_leader_is_frozen_is_carried_out_by_the_new_leader_alone(
    pair: tuple[Daemon, Daemon], tmp_path: Path, slurm_cluster: Any
) -> None:
    leader, standby = pair
    root = leader.root
    leader.start()
    wait_for(lambda: holder(root) == (leader.pid, 1), 60, 0.2, "the first daemon to take the lease")
    standby.start()
    run = leader.submit(specs.write_spec(tmp_path, "long", ["sleep", "300"]))
    wait_for(lambda: leader.status(run).get("state") == "RUNNING", 90, 0.5, "the run to start")
    offset = leader.log_path.stat().st_size
    leader.proc.send_signal(signal.SIGSTOP)  # type: ignore[union-attr]
    # Given at once, from "another login node": the frozen leader still looks alive, so the CLI hands the
    # command over; only the daemon that holds the lease next may carry it out.
    cli = subprocess.Popen(
        [*SHEPHERD, "--root", str(root), "cancel", run],
        env=standby.env,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_for(lambda: (h := holder(root)) is not None and h[0] == standby.pid, 30, 0.1, "the takeover")
    out, err = cli.communicate(timeout=90)
    assert cli.returncode == 0, err
    assert out.startswith(f"cancelled {run} (scancel "), out
    leader.proc.send_signal(signal.SIGCONT)  # type: ignore[union-attr]
    assert leader.wait_exit(20) == 75
    thawed = leader.log_path.read_text(errors="replace")[offset:]
    assert '"event": "request"' not in thawed and "cancelled job" not in thawed, thawed[-3000:]
    taken = [line for line in standby.log_path.read_text().splitlines() if '"event": "request"' in line]
    assert len(taken) == 1 and '"verb": "cancel"' in taken[0], taken
    assert standby.status(run)["state"] == "CANCELLED"
    job = out.split("scancel ")[1].rstrip(")\n")
    wait_for(
        lambda: any(j[0] == job and j[2] == "CANCELLED" for j in slurm_jobs(slurm_cluster.env)),
        30,
        0.5,
        "slurm to cancel the job",
    )
    assert not any((root / "state" / "requests").glob("*.json"))
