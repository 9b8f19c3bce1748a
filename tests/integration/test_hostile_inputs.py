"""Hostile input cannot wedge supervision (issue 21's "done when"), on the real dev Slurm cluster.

One daemon supervises two runs whose jobs hang after a few progress bars. A real CUDA OOM appended to the
first run's driver log is detected and resumed: the baseline. Then the queue is flooded with 1,000 hostile
specs, a billion-laughs spec and a spec whose team rules file holds `(a|aa)+$X`, and the same OOM is
appended to the second run's log at once: every hostile file is refused with its reason in rejected/, the
second run's failure is still detected and resumed, the daemon stays up and its watchdog never finds a
stale loop. Both detection latencies are printed (speed targets live in bench/, not in asserts).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.daemon import REPO, DaemonProcess, wait_for
from tests.support.specs import fake_argv, write_spec

pytestmark = [pytest.mark.slurm, pytest.mark.timeout(300)]
PLAIN = REPO / "tests" / "support" / "plain.sub"
OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has 79.10 GiB in use"
EVIL_RULES = """\
version: 1
rules:
  - name: team-rule
    trigger:
      kind: log
      regex: "(a|aa)+$X"
    actions: [cancel]
"""


def billion_laughs() -> str:
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for prev, name in zip("abcdefg", "bcdefgh", strict=True):
        lines.append(f"{name}: &{name} [{', '.join([f'*{prev}'] * 9)}]")
    return "\n".join([*lines, "name: laughs", "command: *h"]) + "\n"


def flood(tmp: Path) -> list[str]:
    """The 1,000 hostile specs: each kind of bound, over and over."""
    kinds = [
        billion_laughs(),
        "name: deep\ncommand: " + "[" * 3000 + "]" * 3000 + "\n",
        "name: cyc\ncommand: &x [a, *x]\n",
        "name: big\ncommand: [a]\nslurm: {nodes: " + "9" * 5000 + "}\n",
        "name: ts\ncommand: [a]\nworkdir: !!timestamp 99999-01-01\n",
    ]
    return [kinds[i % len(kinds)] for i in range(1000)]


def driver_log(sup: DaemonProcess, run: str) -> Path | None:
    s = sup.status(run)
    job = next((a.get("job_id") for a in s.get("attempt_list", []) if a.get("n") == 1), None)
    if not job or s.get("state") != "RUNNING":
        return None
    path = sup.root / "runs" / run / "logs" / f"{job}-logs" / "ray-driver.log"
    return path if path.exists() and "Collecting rollouts" in path.read_text(errors="replace") else None


def oom_decided_at(sup: DaemonProcess, run: str) -> float | None:
    return next(
        (
            d["at"]
            for d in sup.status(run).get("decisions", [])
            if d["rule"] == "cuda-oom" and d["attempt"] == 1
        ),
        None,
    )


def detect(sup: DaemonProcess, run: str, log: Path) -> float:
    """Append a real OOM line to the run's driver log; seconds until its resume decision is recorded."""
    with log.open("a") as fh:
        fh.write(OOM + "\n")
    t0 = time.time()
    at = wait_for(lambda: oom_decided_at(sup, run), 120, 0.2, f"{run}: the cuda-oom decision")
    return float(at) - t0


def test_hostile_queue_and_rules_are_refused_while_a_normal_run_is_still_resumed(
    tmp_path: Path, slurm_cluster: Any
) -> None:
    sup = DaemonProcess(tmp_path / "root", env={**slurm_cluster.env, "SHEPHERD_LAUNCH_SCRIPT": str(PLAIN)})
    sup.start()
    try:
        runs = [
            sup.submit(write_spec(tmp_path, name, fake_argv(tmp_path, name, "cuda-oom", "--hang")))
            for name in ("base", "under-fire")
        ]
        logs = [wait_for(lambda r=r: driver_log(sup, r), 120, 0.3, f"{r} running") for r in runs]

        baseline = detect(sup, runs[0], logs[0])

        queue = sup.root / "queue"
        evil = tmp_path / "team-rules.yaml"
        evil.write_text(EVIL_RULES)
        (queue / "laughs.yaml").write_text(billion_laughs())
        (queue / "team.yaml").write_text(
            f'name: team\ncommand: ["true"]\nrules: {{files: [{json.dumps(str(evil))}]}}\n'
        )
        for i, text in enumerate(flood(tmp_path)):
            (queue / f"flood-{i:04d}.yaml").write_text(text)
        rejected = sup.root / "rejected"
        # the failure lands while the intake is in the middle of the flood
        wait_for(lambda: any(rejected.glob("*.error.txt")), 60, 0.05, "the intake at work on the flood")
        left = len(list(queue.glob("*.yaml")))
        under_fire = detect(sup, runs[1], logs[1])
        print(
            f"\ndetection latency: baseline {baseline:.2f} s, during the flood {under_fire:.2f} s "
            f"({left} hostile specs still queued when the failure was written)"
        )
        assert left > 0, "the failure must land while the flood is being processed"

        for run in runs:
            final = sup.wait_state(run, {"COMPLETED", "FAILED", "GAVE_UP"}, timeout=120)
            assert (final["state"], final["attempts"]) == ("COMPLETED", 2), final

        wait_for(lambda: not list(queue.glob("*.yaml")), 120, 0.5, "the queue drained")
        notes = {p.name: p.read_text() for p in rejected.glob("*.error.txt")}
        assert len(notes) == 1002
        assert "once its aliases are expanded" in notes["laughs.error.txt"]
        assert f"{evil}:6: rules.0.trigger.regex: invalid regex: `$` (end of line)" in notes["team.error.txt"]
        assert all("shepherd rejected" in n and "  - " in n for n in notes.values())

        assert sup.proc is not None and sup.proc.poll() is None, "the daemon must still be running"
        log = sup.log_text()
        assert "loop stuck" not in log, "the watchdog found a loop that stopped beating"
        assert "Traceback" not in log
    finally:
        sup.stop()
