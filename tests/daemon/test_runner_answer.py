"""The monitor's answer to a job's runner after a driver exit: `end` unless a restart in place gave the word.
With restart in place the default, a job whose attempt went back through Slurm while letting the job finish
(a save deadline's hop) must not wait out the runner's bound for a word nobody gives."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from supervisor.act.inplace import give_run
from supervisor.daemon.compose import build
from supervisor.daemon.monitor import RUNNER_SETTLE_S, Monitor
from supervisor.settings import Settings
from supervisor.slurm.launchers import runner
from tests.support.failures import Clock  # a clock the test sets

RUN = "toy-20260101-000000-abcd"


def setup(tmp_path: Path, code: int) -> tuple[Any, Monitor, Any, Path, Clock]:
    """Attempt 1 of a run under the runner, its driver run 1 reported exited with `code`."""
    built = build(Settings(root=tmp_path / "root"))
    store = built.store
    store.create_run(RUN, "toy", json.dumps({"name": "toy", "command": ["true"]}), "spec.yaml")
    store.begin_attempt(RUN, lambda n: f"t{n}", {"runner": True, runner.BY_RUN: True})
    store.attempt_submitted(RUN, 1, "4242")
    run, attempt = store.get_run(RUN), store.get_attempt(RUN, 1)
    assert run is not None and attempt is not None
    clock = Clock(attempt.intent_at + 30)
    monitor = Monitor(store, built.settings, built.actions, built.heartbeats, clock=clock)
    d = runner.runner_dir(built.settings.runs_dir / RUN / "logs", runner.runner_key(1, RUN))
    d.mkdir(parents=True)
    (d / runner.exit_name(1)).write_text(f"run=1\ncode={code}\nat={clock.now}\nend\n")
    w = monitor.watch_for(run, attempt)
    assert w is not None
    return store, monitor, w, d, clock


def word(d: Path) -> tuple[str, int] | None:
    f = d / runner.word_name(1)
    return runner.parse_word(f.read_text()) if f.exists() else None


def test_a_clean_exit_is_answered_end_at_once_and_a_failure_after_the_rules_had_their_time(
    tmp_path: Path,
) -> None:
    _, monitor, w, d, clock = setup(tmp_path, 0)
    monitor.answer_runner(w, clock.now)
    assert word(d) == ("end", 1)
    _, monitor, w, d, clock = setup(tmp_path / "failed", 1)
    monitor.answer_runner(w, clock.now)
    assert word(d) is None  # the rules may still resume it in place
    monitor.answer_runner(w, clock.now + RUNNER_SETTLE_S)
    assert word(d) == ("end", 1)


def test_a_decision_carried_out_through_slurm_that_lets_the_job_finish_ends_it_at_once(
    tmp_path: Path,
) -> None:
    store, monitor, w, d, clock = setup(tmp_path, 0)
    did = store.record_decision(
        RUN, 1, rule="training-deadline", action="resume,alert", signature="s", reason="r", evidence={}
    )
    assert did is not None
    monitor.answer_runner(w, clock.now)
    assert word(d) is None  # recorded, not carried out yet: a restart in place would give its own word
    store.set_decision_outcome(did, "resuming from step_10 in 0s; the job finishes first")
    monitor.answer_runner(w, clock.now)
    assert word(d) == ("end", 1)


def test_a_restart_in_place_keeps_its_own_word(tmp_path: Path) -> None:
    store, monitor, w, d, clock = setup(tmp_path, 1)
    did = store.record_decision(
        RUN, 1, rule="cuda-oom", action="resume,alert", signature="s", reason="r", evidence={}
    )
    assert did is not None
    give_run(d, 1, attempt=2, script="#!/bin/sh\nexec true\n# end\n", delay_s=0)
    store.set_decision_outcome(did, "resuming from step_10 in place: driver run 2 of Slurm job 4242")
    monitor.answer_runner(w, clock.now + RUNNER_SETTLE_S)
    assert word(d) == ("run", 2)
