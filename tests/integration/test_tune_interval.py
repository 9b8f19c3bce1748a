"""`checkpoint.tune_interval` on real Slurm: a job saves the NeMo RL way and fails; its saves are timed from
the files it wrote, the failure rate comes from the store, and the resubmitted job is given a
`checkpointing.save_period` that divides every kept step and honours it; `status` shows Young/Daly's.
"""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from supervisor.domain.runs import RunState
from supervisor.store import Store
from tests.support.daemon import REPO, DaemonProcess
from tests.support.failures import Clock, failed_hours

PLAIN = REPO / "tests" / "support" / "plain.sub"
SAVER = REPO / "tests" / "support" / "fake_saver.py"


@pytest.fixture
def sup(tmp_path: Path, slurm_cluster: Any) -> Iterator[DaemonProcess]:
    # Another run's history: 3 failures in 30 s of running; this run (no failures yet) borrows its MTBF.
    clock = Clock(time.time() - 3600)
    store = Store(tmp_path / "root" / "state" / "shepherd.sqlite3", clock=clock)
    store.create_run("seed-20261127-000000-abcd", "seed", '{"name": "seed", "command": ["true"]}', "/x")
    failed_hours(store, clock, "seed-20261127-000000-abcd", 3, running_s=10.0)
    store.set_run_state("seed-20261127-000000-abcd", RunState.GAVE_UP, reason="seeded history")
    store.close()
    d = DaemonProcess(tmp_path / "root", env={**slurm_cluster.env, "SHEPHERD_LAUNCH_SCRIPT": str(PLAIN)})
    d.start()
    yield d
    d.stop()


def saved_steps(ck: Path) -> list[int]:
    return sorted(int(p.name.removeprefix("step_")) for p in ck.glob("step_*"))


@pytest.mark.slurm
def test_the_resubmitted_job_saves_at_a_tuned_period_that_keeps_every_kept_step(
    sup: DaemonProcess, tmp_path: Path
) -> None:
    ck, rec = tmp_path / "ck", tmp_path / "record.jsonl"
    ck.mkdir()
    command = [
        sys.executable, str(SAVER), "--checkpoint-dir", str(ck), "--steps", "12", "--fail-at", "9",
        "--record", str(rec), "--step-s", "1.0", "--save-s", "0.3", "checkpointing.save_period=4",
    ]  # fmt: skip
    spec = tmp_path / "tuned.yaml"
    spec.write_text(
        "name: tuned\n"
        f"command: {json.dumps(command)}\n"
        f"workdir: {tmp_path}\n"
        "slurm: {cpus: 1, time: '00:10:00'}\n"
        f"checkpoint: {{dir: {ck}, tune_interval: true}}\n"
        "resume: {backoff_s: 0, in_place: false}\n"  # a restart in place keeps the period: resubmitted
    )
    run = sup.submit(spec)
    done = sup.wait_state(run, {"COMPLETED", "FAILED", "GAVE_UP"}, timeout=120)
    assert done["state"] == "COMPLETED", sup.log_text()[-3000:]
    first, second = [json.loads(line) for line in rec.read_text().splitlines()]
    assert first["save_period"] == 4
    # Attempt 1 kept step_4 and step_8: the tuned period divides both, is recorded, passed and honoured.
    tuned = sup.status(run)["attempt_list"][1]["overrides"]["save_period"]
    assert tuned in (1, 2, 4) and second["save_period"] == tuned
    assert second["argv"][-1] == f"checkpointing.save_period={tuned}"
    assert {4, 8} <= set(saved_steps(ck))
    assert all(s % tuned == 0 for s in saved_steps(ck) if s > 8)
    assert (ck / "step_12" / "config.yaml").read_text().count(f"save_period: {tuned}") == 1
    lines = sup.status(run)["checkpoint_interval"]["lines"]
    # The saves were timed from the files the job wrote, the MTBF borrowed from the seeded run's failures.
    assert re.search(r"Young/Daly: \d+ steps = .* save \(median of \d+\) and a .* MTBF \(all runs'", lines[1])
