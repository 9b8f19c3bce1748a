"""On the real dev Slurm cluster, a job that dies of an exception no rule knows: the run FAILED, its decision
(`shepherd status --json`) names the exception with its file and line, and `shepherd rules suggest`
prints a rule that fires on that log."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from supervisor.rules.engine import load_ruleset
from supervisor.rules.replay import replay
from tests.support.daemon import REPO, DaemonProcess

pytestmark = pytest.mark.slurm
PLAIN = REPO / "tests" / "support" / "plain.sub"

CRASH = (
    "import sys; print('step 1', flush=True); "
    "sys.exit(\"Traceback (most recent call last):\\n  File 'train.py', line 3, in <module>\\n"
    'ValueError: reward shape (64, 2) does not match batch 32")'
)


@pytest.fixture
def daemon(tmp_path: Path, slurm_cluster: Any) -> Any:
    # ray.sub's log layout without Ray (the evidence's subject): a real Ray here would be one more Ray user on
    # the host, which NeMo RL's ray.sub (`ray stop`, in tests beside this one) kills.
    d = DaemonProcess(tmp_path / "root", env={**slurm_cluster.env, "SHEPHERD_LAUNCH_SCRIPT": str(PLAIN)})
    yield d
    d.stop()


def test_an_unknown_exception_is_shown_with_where_it_is_and_becomes_a_rule(
    daemon: DaemonProcess, tmp_path: Path
) -> None:
    spec = tmp_path / "crash.yaml"
    command = [str(REPO / ".venv" / "bin" / "python"), "-c", CRASH]
    spec.write_text(
        f"name: crash\ncommand: {json.dumps(command)}\nworkdir: {REPO}\n"
        "slurm:\n  cpus: 1\n  time: '00:10:00'\n"
    )
    daemon.start()
    run = daemon.submit(spec)
    final = daemon.wait_state(run, {"FAILED", "COMPLETED"}, timeout=180)
    assert final["state"] == "FAILED"
    detail = daemon.status(run)
    (d,) = [d for d in detail["decisions"] if d["rule"] == "unrecognised-failure"]
    lines = d["evidence"]["lines"]
    assert any(
        ln.startswith("ray-driver.log:")
        and ln.endswith(": ValueError: reward shape (64, 2) does not match batch 32")
        for ln in lines
    ), detail
    text = daemon.cli("rules", "suggest", run).stdout
    rules = tmp_path / "suggested.yaml"
    rules.write_text(text)
    daemon.cli("rules", "check", str(rules))
    driver = next((daemon.root / "runs" / run / "logs").glob("*-logs/ray-driver.log"))
    assert [m.rule for m in replay(load_ruleset([rules]), driver) if not m.followup] == ["value-error"]
