"""Two driver runs of one job share its driver log: once the runner says the next driver run starts (a
restart in place), the lines after it are the next attempt's, even when that run fails within seconds of its
start (the ended attempt used to read the shared file DRAIN_AFTER_END_S more: a quick failure was lost)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio

from supervisor.daemon.compose import build
from supervisor.daemon.monitor import DRAIN_AFTER_END_S, Monitor
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
        {"runner": True, runner.BY_RUN: True, "driver_run": 2, "origin": 1},
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


class Teed:
    """Attempt 1 of a job under our launcher, whose driver's output goes to its log and to Slurm's output
    file; its watch has read the OOM in the driver log only, and the job was restarted in place (attempt 2,
    driver run 2). Nothing of what the runner printed after that is written yet."""

    def __init__(self, tmp_path: Path) -> None:
        built = build(Settings(root=tmp_path / "root"))
        self.store = store = built.store
        store.create_run(RUN, "toy", json.dumps({"name": "toy", "command": ["true"]}), "spec.yaml")
        store.begin_attempt(RUN, lambda n: f"t{n}", {"runner": True, runner.BY_RUN: True})
        store.attempt_submitted(RUN, 1, JOB)
        run, first = store.get_run(RUN), store.get_attempt(RUN, 1)
        assert run is not None and first is not None
        self.clock = Clock(first.intent_at + 30)
        self.monitor = Monitor(store, built.settings, built.actions, built.heartbeats, clock=self.clock)
        self.base = built.settings.runs_dir / RUN / "logs"
        (self.base / f"{JOB}-logs").mkdir(parents=True)
        self.driver_log = self.base / f"{JOB}-logs" / layout.DRIVER_LOG
        self.output = layout.output_file(self.base, JOB)
        self.both("driver run 1 starting (attempt 1)")
        w1 = self.monitor.watch_for(run, first)
        assert w1 is not None
        self.w1 = w1
        self.monitor.read_files(w1)
        self.write(self.driver_log, OOM)
        assert self.rules(w1, {str(self.driver_log)}) == ["cuda-oom"]
        store.restart_in_place(
            first,
            "t2",
            {"runner": True, runner.BY_RUN: True, "driver_run": 2, "origin": 1},
            exit_code=1,
            ended_at=self.clock.now,
            message="attempt 2 restarted in place",
            give_word=lambda n: None,
        )

    def both(self, text: str) -> None:
        for f in (self.driver_log, self.output):
            say(f, text)

    def write(self, f: Path, line: str) -> None:
        with f.open("a") as fh:
            fh.write(line + "\n")

    def rules(self, w: Any, paths: set[str] | None = None) -> list[str]:
        return [m.rule for m in self.monitor.read_files(w, paths) if not m.followup]

    def second(self) -> Any:
        self.clock.now += 1
        self.monitor.sync()
        return self.monitor.watches[(RUN, 2)]


def test_a_failure_printed_to_two_files_is_the_ended_driver_runs_in_both(tmp_path: Path) -> None:
    """Our launcher tees the driver's output to its log and to Slurm's output file. The first copy of an OOM
    restarted the job in place; the second copy, read after the restart, is still driver run 1's and must not
    restart the new driver run too (it once did, 55 ms later, under load)."""
    t = Teed(tmp_path)
    t.write(t.output, OOM)  # the tee's copy of driver run 1's failure, not read yet
    t.both("driver run 1 exited with code 1")
    t.both("driver run 2 starting in place (attempt 2)")
    w2 = t.second()
    assert w2.held == {str(t.driver_log), str(t.output)}
    assert t.rules(w2) == []
    t.write(t.output, OOM)  # driver run 2's own failure
    assert t.rules(w2) == ["cuda-oom"]


def test_a_time_limit_before_the_next_driver_run_starts_is_the_new_attempts(tmp_path: Path) -> None:
    """The job's time limit came while the runner waited out Shepherd's backoff: driver run 2 never starts,
    and Slurm's word about the job's end, after the runner's `exited` line, is attempt 2's to read."""
    t = Teed(tmp_path)
    t.write(t.output, OOM)
    t.both("driver run 1 exited with code 1")
    t.both("run again in 60s (Shepherd's backoff)")
    t.write(
        t.output,
        f"slurmstepd: error: *** JOB {JOB} ON node1 CANCELLED AT 2026-01-01T01:00:00 DUE TO TIME LIMIT ***",
    )
    assert t.rules(t.second()) == ["slurm-time-limit"]


def test_the_ended_attempts_last_drain_leaves_the_next_driver_runs_lines(tmp_path: Path) -> None:
    """Attempt 2's watch read the runner's `driver run 2 starting` line; attempt 1's final drain, due
    DRAIN_AFTER_END_S later, must not read (and drop) what driver run 2 writes meanwhile."""
    t = Teed(tmp_path)
    t.both("driver run 1 exited with code 1")
    t.both("driver run 2 starting in place (attempt 2)")
    w2 = t.second()
    assert t.rules(w2) == []
    t.write(t.driver_log, OOM)  # driver run 2 fails, before attempt 2's watch looks again
    t.clock.now += DRAIN_AFTER_END_S + 1
    due = t.monitor.sync()
    assert [w.n for w in due] == [1] and t.w1.superseded
    anyio.run(t.monitor.drain, t.w1)
    assert t.rules(w2) == ["cuda-oom"]


def test_a_requeue_after_a_restart_in_place_forgets_the_earlier_starts_runner_lines(tmp_path: Path) -> None:
    """The requeued start's runner counts driver runs from 1 again in the same Slurm output file: attempt 2
    then reads that file whole, and no runner line of the earlier start holds or ends anything."""
    t = Teed(tmp_path)
    t.both("driver run 1 exited with code 1")
    t.both("driver run 2 starting in place (attempt 2)")
    w2 = t.second()
    first = runner.runner_dir(t.base, runner.runner_key(1, RUN))
    first.mkdir(parents=True)
    (first / runner.script_name(2)).write_text("#!/bin/sh\nexec true\n# end\n")
    anyio.run(t.monitor.answer_runner, w2, t.clock.now)  # the job's first start: driver run 2 runs there
    t.write(t.output, OOM)  # not read yet when Slurm requeues the job
    assert w2.driver_run == 2 and w2.held
    again = runner.runner_dir(t.base, runner.runner_key(1, RUN), start=1)
    again.mkdir()
    anyio.run(t.monitor.answer_runner, w2, t.clock.now)
    assert w2.driver_run == 1 and w2.held == set()
    assert all(str(f) not in t.monitor._started for f in (t.driver_log, t.output))
    assert t.rules(w2) == ["cuda-oom"]  # the requeued start's failure (the earlier start's copy was read)


def test_a_copy_in_a_file_the_previous_watch_had_not_found_yet_is_still_the_previous_runs(
    tmp_path: Path,
) -> None:
    """A requeued start writes a new `<job>-1-logs/` folder: its driver log held the OOM's other copy when
    the restart in place came, before attempt 1's watch had listed the folder (seen in CI, 86 ms apart)."""
    t = Teed(tmp_path)
    restart_log = t.base / f"{JOB}-1-logs" / layout.DRIVER_LOG
    restart_log.parent.mkdir()
    for text in ("driver run 1 starting (attempt 1)",):
        say(restart_log, text)
    t.write(restart_log, OOM)
    say(restart_log, "driver run 1 exited with code 1")
    w2 = t.second()
    assert str(restart_log) in w2.held and str(restart_log) not in t.w1.files
    assert t.rules(w2) == []
    say(restart_log, "driver run 2 starting in place (attempt 2)")
    t.write(restart_log, OOM)  # driver run 2's own
    assert t.rules(w2) == ["cuda-oom"]
