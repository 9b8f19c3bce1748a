"""A daemon restart mid-run (kill -9) neither re-fires a rule for lines it already acted on nor misses lines
written while it was down: the monitor's file cursors live in SQLite with the decisions.

The rule only alerts, so the job keeps running across the restart; each line carries its own token, which
the rule uses as the failure signature, so every line is its own decision.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest

from tests.support.daemon import REPO, DaemonProcess, wait_for

pytestmark = pytest.mark.slurm
PLAIN = REPO / "tests" / "support" / "plain.sub"
OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
RULES = r"""
incident_window: 0s
rules:
  - name: oom-alert
    description: GPU out of memory (alert only)
    priority: 80
    category: failure
    signature_group: 1
    trigger: {kind: log, regex: 'torch\.OutOfMemoryError: CUDA out of memory.*\(line ([a-z]+)\)'}
    actions:
      - alert: {level: warning, message: "{run}: {excerpt}"}
"""


@pytest.fixture
def sup(tmp_path: Path, slurm_cluster: Any) -> Any:
    d = DaemonProcess(tmp_path / "root", env={**slurm_cluster.env, "SHEPHERD_LAUNCH_SCRIPT": str(PLAIN)})
    d.start()
    yield d
    d.stop()


def start_run(sup: DaemonProcess, tmp: Path) -> tuple[str, Path]:
    """A run whose job sleeps; returns its id and its driver log once the job runs."""
    rules = tmp / "rules.yaml"
    rules.write_text(RULES)
    spec = tmp / "spec.yaml"
    spec.write_text(
        "\n".join(
            [
                "name: restart",
                'command: ["sleep", "300"]',
                f"workdir: {tmp}",
                f"log_dir: {tmp / 'logs'}",
                "slurm: {cpus: 1, time: '00:10:00'}",
                f"rules: {{files: [{rules}], use_default: false}}",
            ]
        )
        + "\n"
    )
    run = sup.submit(spec)
    job = sup.wait_state(run, "RUNNING")["slurm_job_id"]
    log = tmp / "logs" / f"{job}-logs" / "ray-driver.log"
    wait_for(log.exists, 30, what=f"{log}")
    return run, log


def token(text: str) -> str:
    """The word after `(line ` in a reason or an alert (which goes on to say what was done)."""
    return text.rsplit("(line ", 1)[-1].split(")", 1)[0]


def signatures(sup: DaemonProcess, run: str) -> list[str]:
    """The token of the line behind each decision, in decision order."""
    return [token(d["reason"]) for d in sup.status(run)["decisions"]]


def alerts_logged(log_text: str, run: str) -> list[str]:
    """Alerts the daemon published (its JSON log), by the token of the line that caused them."""
    out = []
    for line in log_text.splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if rec.get("kind") == "alert" and rec.get("run_id") == run:
            out.append(token(str(rec.get("event", ""))))
    return out


def append(log: Path, token: str) -> None:
    with log.open("a") as fh:
        fh.write(f"{OOM} (line {token})\n")


def test_a_kill9_restart_does_not_refire_lines_already_acted_on(sup: DaemonProcess, tmp_path: Path) -> None:
    run, log = start_run(sup, tmp_path)
    append(log, "before")
    wait_for(lambda: signatures(sup, run) == ["before"], 30, what="the first decision")
    sup.stop(signal.SIGKILL)
    mark = len(sup.log_text())
    sup.start()
    # A later line proves the restarted daemon reads the file again before we judge what it re-read.
    append(log, "after")
    wait_for(lambda: "after" in signatures(sup, run), 60, what="a decision after the restart")
    assert signatures(sup, run) == ["before", "after"]
    after_restart = sup.log_text()[mark:]
    assert alerts_logged(after_restart, run) == ["after"]
    assert "decision already taken" not in after_restart


def test_lines_written_while_the_daemon_is_down_are_acted_on_after_restart(
    sup: DaemonProcess, tmp_path: Path
) -> None:
    run, log = start_run(sup, tmp_path)
    append(log, "first")
    wait_for(lambda: signatures(sup, run) == ["first"], 30, what="the first decision")
    sup.stop(signal.SIGKILL)
    append(log, "whiledown")
    sup.start()
    wait_for(lambda: "whiledown" in signatures(sup, run), 60, what="the line written while down")
    assert signatures(sup, run) == ["first", "whiledown"]
    assert sup.status(run)["state"] == "RUNNING"  # alerted, nothing else: the job was left alone
