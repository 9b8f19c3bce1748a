"""The monitor's answer to a job's runner after a driver exit: `end` unless a restart in place gave the word.
With restart in place the default, a job whose attempt went back through Slurm while letting the job finish
(a save deadline's hop) must not wait out the runner's bound for a word nobody gives."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio

from supervisor.act.inplace import give_run
from supervisor.daemon.compose import build
from supervisor.daemon.monitor import Monitor
from supervisor.decide.inplace import RUNNER_SETTLE_S
from supervisor.settings import Settings
from supervisor.slurm.launchers import runner
from tests.support.failures import Clock  # a clock the test sets

RUN = "toy-20260101-000000-abcd"


def setup(
    tmp_path: Path, code: int, *, checkpoint: Path | None = None
) -> tuple[Any, Monitor, Any, Path, Clock]:
    """Attempt 1 of a run under the runner, its driver run 1 reported exited with `code`; with `checkpoint`,
    the spec's checkpoint dir, as it was at the submission."""
    built = build(Settings(root=tmp_path / "root"))
    store = built.store
    body: dict[str, Any] = {"name": "toy", "command": ["true"], "resume": {"backoff_s": 0}}
    overrides: dict[str, Any] = {"runner": True, runner.BY_RUN: True}
    if checkpoint is not None:
        body["checkpoint"] = {"dir": str(checkpoint)}
        steps = [int(p.name.split("_")[1]) for p in checkpoint.glob("step_*")]
        overrides["ckpt_step_at_submit"] = max(steps) if steps else None
    store.create_run(RUN, "toy", json.dumps(body), "spec.yaml")
    store.begin_attempt(RUN, lambda n: f"t{n}", overrides)
    store.attempt_submitted(RUN, 1, "4242")
    store.observe_attempt(RUN, 1, slurm_state="RUNNING", reason=None, nodes="node1", started=True)
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
    anyio.run(monitor.answer_runner, w, clock.now)
    assert word(d) == ("end", 1)
    _, monitor, w, d, clock = setup(tmp_path / "failed", 1)
    anyio.run(monitor.answer_runner, w, clock.now)
    assert word(d) is None  # the rules may still resume it in place
    anyio.run(monitor.answer_runner, w, clock.now + RUNNER_SETTLE_S)
    assert word(d) == ("end", 1)


def test_a_decision_carried_out_through_slurm_that_lets_the_job_finish_ends_it_at_once(
    tmp_path: Path,
) -> None:
    store, monitor, w, d, clock = setup(tmp_path, 0)
    did = store.record_decision(
        RUN, 1, rule="training-deadline", action="resume,alert", signature="s", reason="r", evidence={}
    )
    assert did is not None
    anyio.run(monitor.answer_runner, w, clock.now)
    assert word(d) is None  # recorded, not carried out yet: a restart in place would give its own word
    store.set_decision_outcome(did, "resuming from step_10 in 0s; the job finishes first")
    anyio.run(monitor.answer_runner, w, clock.now)
    assert word(d) == ("end", 1)


def test_a_restart_in_place_keeps_its_own_word(tmp_path: Path) -> None:
    store, monitor, w, d, clock = setup(tmp_path, 1)
    did = store.record_decision(
        RUN, 1, rule="cuda-oom", action="resume,alert", signature="s", reason="r", evidence={}
    )
    assert did is not None
    give_run(d, 1, attempt=2, script="#!/bin/sh\nexec true\n# end\n", delay_s=0)
    store.set_decision_outcome(did, "resuming from step_10 in place: driver run 2 of Slurm job 4242")
    anyio.run(monitor.answer_runner, w, clock.now + RUNNER_SETTLE_S)
    assert word(d) == ("run", 2)


def test_a_requeued_job_gets_its_word_in_the_folder_its_new_start_claimed(tmp_path: Path) -> None:
    """`scontrol requeue` signals the driver (its run 1 reports code 143, the job's first start is told to
    end) and starts the batch script again: the new start's runner waits for its own word after its run 1,
    which must come, or the job holds its nodes for the runner's whole bound."""
    _, monitor, w, first, clock = setup(tmp_path, 143)
    anyio.run(monitor.answer_runner, w, clock.now)
    anyio.run(monitor.answer_runner, w, clock.now + RUNNER_SETTLE_S)
    assert word(first) == ("end", 1)
    again = runner.runner_dir(first.parent, runner.runner_key(1, RUN), start=1)
    again.mkdir()
    clock.now += 60
    anyio.run(monitor.answer_runner, w, clock.now)
    assert word(again) is None  # its driver still runs
    (again / runner.exit_name(1)).write_text(f"run=1\ncode=0\nat={clock.now}\nend\n")
    anyio.run(monitor.answer_runner, w, clock.now)
    assert word(again) == ("end", 1)


def test_a_requeue_after_a_restart_in_place_counts_driver_runs_from_one_again(tmp_path: Path) -> None:
    """Driver run 2 (a restart in place) was the attempt's; the requeued job's runner starts at run 1."""
    _, monitor, w, first, clock = setup(tmp_path, 0)
    w.driver_run = 2
    (first / runner.script_name(2)).write_text("#!/bin/sh\nexec true\n# end\n")
    anyio.run(monitor.answer_runner, w, clock.now)
    assert w.driver_run == 2
    again = runner.runner_dir(first.parent, runner.runner_key(1, RUN), start=1)
    again.mkdir()
    (again / runner.exit_name(1)).write_text(f"run=1\ncode=0\nat={clock.now}\nend\n")
    anyio.run(monitor.answer_runner, w, clock.now)
    assert w.driver_run == 1 and word(again) == ("end", 1)


def saved(ckpt: Path, step: int) -> None:
    (ckpt / f"step_{step}").mkdir(parents=True)
    (ckpt / f"step_{step}" / "training_info.json").write_text(json.dumps({"step": step}))


def test_a_failure_no_rule_claims_after_new_steps_restarts_in_place_instead_of_ending_the_job(
    tmp_path: Path,
) -> None:
    """The runner still waits, so the unrecognised failure's resume-once keeps the allocation: the driver
    trained from step 4 to step 6 (no save yet), then died of something no rule knows."""
    ckpt = tmp_path / "ckpt"
    saved(ckpt, 4)
    store, monitor, w, d, clock = setup(tmp_path, 1, checkpoint=ckpt)
    store.record_step(RUN, 1, 6, clock.now)
    anyio.run(monitor.answer_runner, w, clock.now)  # the exit report seen; the rules get their time
    anyio.run(monitor.answer_runner, w, clock.now + RUNNER_SETTLE_S)
    assert word(d) == ("run", 2)  # driver run 2 of the same job, not `end`
    (decision,) = store.decisions(RUN)
    assert (decision.rule, decision.action) == ("unrecognised-failure", "resume")
    assert "trained from step 4 to step 6" in decision.reason and "in place" in (decision.outcome or "")
    anyio.run(monitor.answer_runner, w, clock.now + 2 * RUNNER_SETTLE_S)
    assert word(d) == ("run", 2)  # and the next look keeps that word


def test_a_failure_no_rule_claims_before_any_progress_still_ends_the_job_for_a_human(tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt"
    saved(ckpt, 4)
    store, monitor, w, d, clock = setup(tmp_path, 1, checkpoint=ckpt)
    anyio.run(monitor.answer_runner, w, clock.now)  # the exit report seen; the rules get their time
    anyio.run(monitor.answer_runner, w, clock.now + RUNNER_SETTLE_S)
    assert word(d) == ("end", 1)
    assert store.decisions(RUN) == []  # the FAILED end, once Slurm says it, is the alert's


def test_a_runner_ending_the_job_after_a_signal_is_left_to_slurms_word(tmp_path: Path) -> None:
    """A scancel signals the driver (code 143) and the runner ends the job itself: CANCELLED is never
    resumed, so no decision is taken from the runner's report."""
    ckpt = tmp_path / "ckpt"
    saved(ckpt, 4)
    store, monitor, w, d, clock = setup(tmp_path, 143, checkpoint=ckpt)
    store.record_step(RUN, 1, 6, clock.now)
    (d / runner.ENDED_NAME).write_text("run=1\ncode=143\nwhy=signal\nend\n")
    anyio.run(monitor.answer_runner, w, clock.now)  # the exit report seen; the rules get their time
    anyio.run(monitor.answer_runner, w, clock.now + RUNNER_SETTLE_S)
    assert store.decisions(RUN) == []
