"""`ended-not-written` on real Slurm jobs: the driver exited, ENDED never came, the job idles (NeMo RL #1019).

The launcher (tests/support/hung_cleanup.sub) keeps ray.sub's log layout and logs its exact
`[ray.sub <time>] driver exited with code N` line into slurm-<jobid>.out; on the first attempt it then hangs
without writing ENDED, like a ray.sub whose node srun step never returns. The daemon runs with
`watch.ended_overdue_s` = 5 s instead of ten minutes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.daemon import REPO, DaemonProcess, wait_for
from tests.support.specs import fake_argv, write_spec

pytestmark = pytest.mark.slurm
LAUNCHER = REPO / "tests" / "support" / "hung_cleanup.sub"
RULE = "ended-not-written"


@pytest.fixture(scope="module")
def sup(tmp_path_factory: pytest.TempPathFactory, slurm_cluster: Any) -> Any:
    root = tmp_path_factory.mktemp("ended-daemon")
    env = {
        **slurm_cluster.env,
        "SHEPHERD_LAUNCH_SCRIPT": str(LAUNCHER),
        "SHEPHERD_WATCH__ENDED_OVERDUE_S": "5",
        "SHEPHERD_WATCH__POLL_INTERVAL_S": "0.5",
    }
    d = DaemonProcess(root / "root", env=env)
    d.start()
    yield d
    d.stop()


def spec(tmp: Path, name: str, env: dict[str, str]) -> Path:
    # The launcher's own end is the subject: with the runner (the default) the driver's unrecognised failure
    # would restart in place inside the job and the launcher would never reach its cleanup.
    return write_spec(tmp, name, fake_argv(tmp, name, "silent"), env=env, resume="in_place: false")


def decisions(sup: DaemonProcess, run: str) -> list[dict[str, Any]]:
    return [
        d
        for d in sup.status(run).get("decisions", [])
        if d["action"] != "none" and d["rule"] != "run-completed"
    ]


def test_a_job_idling_without_ended_is_cancelled_and_resumed(sup: DaemonProcess, tmp_path: Path) -> None:
    run = sup.submit(spec(tmp_path, "r-hung", {"HANG_AFTER_DRIVER": "1"}))
    d = wait_for(
        lambda: next((x for x in decisions(sup, run) if x["rule"] == RULE and x["outcome"]), None),
        90,
        0.5,
        f"an {RULE} decision",
    )
    assert d["attempt"] == 1 and "resume" in d["action"] and "alert" in d["action"]
    assert "cancelled job" in d["outcome"] and "resuming from step_10" in d["outcome"], d

    # The evidence is the monitor's own line, naming the idle job and its log folder.
    first = sup.status(run)["attempt_list"][0]
    job = first["job_id"]
    ev = d["evidence"]
    assert ev["source"] == "shepherd-monitor"
    assert any("ENDED not written" in line and f"job {job} is RUNNING" in line for line in ev["lines"]), ev
    text = sup.cli("status", run).stdout
    assert f"attempt 1: {RULE} -> " in text and "ENDED not written" in text, text

    # What the job really did: Ray "started", the driver exited 1, ENDED never appeared.
    logs = sup.root / "runs" / run / "logs"
    assert (logs / f"{job}-logs" / "STARTED_RAY_HEAD").exists()
    assert not (logs / f"{job}-logs" / "ENDED").exists()
    out = (logs / f"slurm-{job}.out").read_text()
    assert "] driver exited with code 1" in out and "ENDED rc=" not in out

    final = sup.wait_state(run, {"COMPLETED", "FAILED", "GAVE_UP"}, timeout=90)
    assert final["state"] == "COMPLETED", sup.status(run)
    assert final["attempts"] == 2
    assert sup.status(run)["attempt_list"][0]["slurm_state"] == "CANCELLED"
    assert [x["rule"] for x in decisions(sup, run)] == [RULE]
    records = [json.loads(line) for line in (tmp_path / "r-hung" / "record.jsonl").read_text().splitlines()]
    assert [r["attempt"] for r in records] == [1, 2]
    assert records[1]["argv"][-2:] == ["--resume-from", str(tmp_path / "r-hung" / "ckpt" / "step_10")]


def test_a_job_that_writes_ended_is_not_flagged(sup: DaemonProcess, tmp_path: Path) -> None:
    # Same driver exit (code 1), but ENDED is written; the job then stays RUNNING well past the 5 s threshold.
    run = sup.submit(spec(tmp_path, "r-ended", {"LINGER_AFTER_ENDED": "12"}))
    final = sup.wait_state(run, {"COMPLETED", "FAILED", "GAVE_UP"}, timeout=150)
    status = sup.status(run)
    first = status["attempt_list"][0]
    assert (first["slurm_state"], first["exit_code"]) == ("FAILED", 1), status
    assert [x for x in status["decisions"] if x["rule"] == RULE] == []
    # No rule explains the failure, but the attempt saved step_10 first: resumed once from it, after the job
    # ended by itself (nothing cancelled), and the second attempt completes.
    [d] = decisions(sup, run)
    assert (d["rule"], d["action"]) == ("unrecognised-failure", "resume"), d
    assert "resuming from step_10" in d["outcome"] and "cancelled" not in d["outcome"], d
    assert (final["state"], final["attempts"]) == ("COMPLETED", 2), status
    job = status["attempt_list"][0]["job_id"]
    logs = sup.root / "runs" / run / "logs"
    assert (logs / f"{job}-logs" / "ENDED").exists()
    assert "] driver exited with code 1" in (logs / f"slurm-{job}.out").read_text()
