"""Two driver runs of one job share its driver log: once the runner says the next driver run starts (a
restart in place), the lines after it are the next attempt's, even when that run fails within seconds of its
start (the ended attempt used to read the shared file DRAIN_AFTER_END_S more: a quick failure was lost)."""

from __future__ import annotations

import json
from pathlib import Path

import anyio

from supervisor.daemon.compose import build
from supervisor.daemon.monitor import Monitor
from supervisor.settings import Settings
from supervisor.slurm.launchers import layout, runner
from tests.support.failures import Clock  # a clock the test sets

RUN = "toy-20260101-000000-abcd"
JOB = "4242"
OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity"


def say(log: Path, text: str) -> None:
    with log.open("a") as fh:
        fh.write(f"shepherd-runner [2026-01-01 00:00:00]: {text}\n")


def test_a_driver_run_failing_right_after_its_restart_in_place_is_its_own_attempts_failure(
    tmp_path: Path,
) -> None:
    built = build(Settings(root=tmp_path / "root"))
    store = built.store
    store.create_run(RUN, "toy", json.dumps({"name": "toy", "command": ["true"]}), "spec.yaml")
    store.begin_attempt(RUN, lambda n: f"t{n}", {"runner": True, runner.BY_RUN: True})
    store.attempt_submitted(RUN, 1, JOB)
    run, first = store.get_run(RUN), store.get_attempt(RUN, 1)
    assert run is not None and first is not None
    clock = Clock(first.intent_at + 30)
    monitor = Monitor(store, built.settings, built.actions, built.heartbeats, clock=clock)
    logs = built.settings.runs_dir / RUN / "logs" / f"{JOB}-logs"
    logs.mkdir(parents=True)
    driver_log = logs / layout.DRIVER_LOG
    say(driver_log, "driver run 1 starting (attempt 1)")
    w1 = monitor.watch_for(run, first)
    assert w1 is not None
    assert monitor.read_files(w1) == [] and not w1.superseded

    store.restart_in_place(
        first,
        "t2",
        {"runner": True, runner.BY_RUN: True, "driver_run": 2},
        exit_code=1,
        ended_at=clock.now,
        message="attempt 2 restarted in place",
        give_word=lambda n: None,
    )
    say(driver_log, "driver run 1 exited with code 1")
    say(driver_log, "driver run 2 starting in place (attempt 2)")
    monitor.read_files(w1)
    assert w1.superseded  # the runner's line: what follows is driver run 2's
    clock.now += 1
    due = monitor.sync()  # attempt 2 is watched; attempt 1 is due at once, not DRAIN_AFTER_END_S later
    assert [w.n for w in due] == [1]
    anyio.run(monitor.drain, w1)
    assert (RUN, 1) not in monitor.watches

    with driver_log.open("a") as fh:
        fh.write(OOM + "\n")  # driver run 2 fails within a second of its start
    w2 = monitor.watches[(RUN, 2)]
    assert [m.rule for m in monitor.read_files(w2) if not m.followup] == ["cuda-oom"]


def test_a_failure_printed_to_two_files_is_the_ended_driver_runs_in_both(tmp_path: Path) -> None:
    """Our launcher tees the driver's output to its log and to Slurm's output file. The first copy of an OOM
    restarted the job in place; the second copy, read after the restart, is still driver run 1's and must not
    restart the new driver run too (it once did, 55 ms later, under load)."""
    built = build(Settings(root=tmp_path / "root"))
    store = built.store
    store.create_run(RUN, "toy", json.dumps({"name": "toy", "command": ["true"]}), "spec.yaml")
    store.begin_attempt(RUN, lambda n: f"t{n}", {"runner": True, runner.BY_RUN: True})
    store.attempt_submitted(RUN, 1, JOB)
    run, first = store.get_run(RUN), store.get_attempt(RUN, 1)
    assert run is not None and first is not None
    clock = Clock(first.intent_at + 30)
    monitor = Monitor(store, built.settings, built.actions, built.heartbeats, clock=clock)
    base = built.settings.runs_dir / RUN / "logs"
    (base / f"{JOB}-logs").mkdir(parents=True)
    driver_log, output = base / f"{JOB}-logs" / layout.DRIVER_LOG, layout.output_file(base, JOB)
    for f in (driver_log, output):
        say(f, "driver run 1 starting (attempt 1)")
    w1 = monitor.watch_for(run, first)
    assert w1 is not None
    monitor.read_files(w1)
    with driver_log.open("a") as fh:
        fh.write(OOM + "\n")
    assert [m.rule for m in monitor.read_files(w1, {str(driver_log)}) if not m.followup] == ["cuda-oom"]

    store.restart_in_place(
        first,
        "t2",
        {"runner": True, runner.BY_RUN: True, "driver_run": 2},
        exit_code=1,
        ended_at=clock.now,
        message="attempt 2 restarted in place",
        give_word=lambda n: None,
    )
    with output.open("a") as fh:
        fh.write(OOM + "\n")  # the tee's copy of driver run 1's failure, not read yet
    for f in (driver_log, output):
        say(f, "driver run 1 exited with code 1")
        say(f, "driver run 2 starting in place (attempt 2)")
    clock.now += 1
    monitor.sync()
    w2 = monitor.watches[(RUN, 2)]
    assert w2.hold_before_start
    assert [m.rule for m in monitor.read_files(w2) if not m.followup] == []

    with output.open("a") as fh:
        fh.write(OOM + "\n")  # driver run 2's own failure
    assert [m.rule for m in monitor.read_files(w2) if not m.followup] == ["cuda-oom"]
