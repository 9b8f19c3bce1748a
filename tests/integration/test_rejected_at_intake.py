"""A run id `shepherd submit` printed stays findable when the daemon's intake refuses the spec, on the real
dev cluster: the CLI (which does not ask sbatch --test-only) queues a spec for a partition Slurm does not
have; the daemon, whose settings ask it, is refused by sbatch and rejects the spec. `shepherd status ID` then
says so with Slurm's reason and the error file, and the Slack channel (the stand-in) hears of it once."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.daemon import REPO, SHEPHERD, DaemonProcess, wait_for
from tests.support.standin_thread import StandinThread, slack_env, wait_connected

pytestmark = pytest.mark.slurm
CHANNEL = "C0REJECT"


@pytest.fixture
def slack() -> Iterator[StandinThread]:
    s = StandinThread().start()
    yield s
    s.stop()


@pytest.fixture
def daemon(tmp_path: Path, slurm_cluster: Any, slack: StandinThread) -> Iterator[DaemonProcess]:
    env = {
        **slurm_cluster.env,
        "SHEPHERD_PREFLIGHT__AT_INTAKE": "true",
        "SHEPHERD_PREFLIGHT__TEST_ONLY": "true",  # the daemon asks `sbatch --test-only`
        "SHEPHERD_PREFLIGHT__SHARED_PATHS": '["/"]',
        **slack_env(slack.standin, CHANNEL, "xoxb-1111-2222-rejecttoken", "xapp-1-A0REJ-3333-rejectapptoken"),
    }
    d = DaemonProcess(tmp_path / "root", env=env)
    d.start()
    wait_connected(slack, d.stop, d.log_text)
    yield d
    d.stop()


def submit_without_asking_slurm(d: DaemonProcess, spec: Path) -> str:
    """`shepherd submit` as a user whose own settings skip sbatch --test-only."""
    env = {**d.env, "SHEPHERD_PREFLIGHT__TEST_ONLY": "false"}
    res = subprocess.run(
        [*SHEPHERD, "--root", str(d.root), "submit", str(spec)],
        env=env,
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
    )
    assert res.returncode == 0, res.stderr
    return res.stdout.strip().splitlines()[-1]


def test_a_spec_the_daemon_rejects_is_found_by_its_printed_id_and_told_to_slack_once(
    daemon: DaemonProcess, slack: StandinThread, tmp_path: Path
) -> None:
    spec = tmp_path / "nowhere.yaml"
    spec.write_text(
        f'name: nowhere\ncommand: ["true"]\nworkdir: {json.dumps(str(tmp_path))}\n'
        "slurm: {partition: nosuchpartition, nodes: 1}\n"
    )
    run = submit_without_asking_slurm(daemon, spec)

    rejected = daemon.wait_state(run, "REJECTED", timeout=90)

    error_file = Path(rejected["error_file"])
    assert error_file == daemon.root / "rejected" / f"{run}.error.txt" and error_file.is_file()
    [reason] = rejected["reasons"]
    assert "slurm.partition: sbatch --test-only refused the job" in reason and "nosuchpartition" in reason
    text = daemon.cli("status", run).stdout
    assert "REJECTED at intake" in text and str(error_file) in text
    assert "partition" in text
    listing = daemon.cli("status").stdout
    assert "rejected at intake: 1" in listing and run in listing

    def told() -> list[dict[str, Any]]:
        return [m for m in slack.recorded().messages if "rejected at intake" in (m["text"] or "")]

    [message] = wait_for(told, 60, 0.2, "the rejection in Slack")
    assert message["channel"] == CHANNEL
    assert "1 spec rejected at intake" in message["text"] and run in json.dumps(message.get("blocks"))
    assert "xoxb-1111-2222-rejecttoken" not in json.dumps(slack.recorded().messages)
    assert len(told()) == 1
    assert not list((daemon.root / "runs").iterdir())  # nothing was claimed, nothing submitted
    assert os.path.exists(daemon.root / "rejected" / f"{run}.yaml")
