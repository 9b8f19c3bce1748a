"""The monitor writes each attempt's timeline into the store as the trainer's files show it: Ray up from the
launcher's STARTED_RAY_HEAD, steps (with their reward) from status.json and metrics.jsonl, validation and
checkpoint stretches, checkpoints written; a resumed attempt marks only the steps past its checkpoint."""

from __future__ import annotations

import json
import os
from pathlib import Path

from supervisor.daemon.compose import build
from supervisor.daemon.monitor import Monitor
from supervisor.settings import Settings
from supervisor.store import Store

RUN = "toy-20260101-000000-abcd"


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def write_status(logs: Path, **fields: object) -> None:
    tmp = logs / "status.json.tmp"
    tmp.write_text(json.dumps(fields))
    os.replace(tmp, logs / "status.json")


def started(store: Store, n: int = 1, after_s: float = 0.0) -> float:
    """Slurm started attempt n's job `after_s` after its intent (as a poll records it); returns the intent."""
    attempt = store.get_attempt(RUN, n)
    assert attempt is not None
    store.observe_attempt(
        RUN,
        n,
        slurm_state="RUNNING",
        reason=None,
        nodes="node1",
        started=True,
        started_at=attempt.intent_at + after_s,
    )
    return attempt.intent_at


def test_the_monitor_records_ray_up_steps_rewards_and_stretches_of_a_resumed_attempt(tmp_path: Path) -> None:
    logs = tmp_path / "trainer-logs"
    (logs / "exp_001").mkdir(parents=True)
    built = build(Settings(root=tmp_path / "root"))
    store = built.store
    spec = {
        "name": "toy",
        "command": ["true"],
        "trainer_log_dir": str(logs),
        "checkpoint": {"dir": str(tmp_path / "ck")},
        "resume": {"pass_checkpoint": ["--resume-from", "{checkpoint}"]},
    }
    store.create_run(RUN, "toy", json.dumps(spec), "spec.yaml")
    store.begin_attempt(RUN, lambda n: f"t{n}", {"checkpoint": str(tmp_path / "ck" / "step_10")})
    store.attempt_submitted(RUN, 1, "4242")
    t0 = started(store)
    attempt = store.get_attempt(RUN, 1)
    run = store.get_run(RUN)
    assert attempt is not None and run is not None
    clock = Clock(t0 + 30)
    monitor = Monitor(store, built.settings, built.actions, built.heartbeats, clock=clock)

    head_dir = built.settings.runs_dir / RUN / "logs" / "4242-logs"
    head_dir.mkdir(parents=True)
    (head_dir / "STARTED_RAY_HEAD").touch()
    os.utime(head_dir / "STARTED_RAY_HEAD", (t0 + 20, t0 + 20))
    # Last attempt's rows (up to its crash at step 12) are still in the file, and its status.json too.
    rows = [{"step": s, "time": t0 - 100 + s, "train/reward_mean": 0.1 * s} for s in range(1, 13)]
    (logs / "exp_001" / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    write_status(logs, phase="failed", step=12, started_at=t0 - 500, last_progress_at=t0 - 90)
    w = monitor.watch_for(run, attempt)
    assert w is not None
    monitor.read_trainer(w)

    write_status(logs, phase="starting", step=10, started_at=t0 + 21, last_progress_at=t0 + 25)
    monitor.read_trainer(w)
    write_status(logs, phase="generating", step=10, started_at=t0 + 21, last_progress_at=t0 + 31)
    monitor.read_trainer(w)
    with (logs / "exp_001" / "metrics.jsonl").open("a") as fh:
        fh.write(json.dumps({"step": 11, "time": t0 + 40, "train/reward_mean": 0.55}) + "\n")
    write_status(logs, phase="validating", step=11, started_at=t0 + 21, last_progress_at=t0 + 40.2)
    monitor.read_trainer(w)
    write_status(
        logs,
        phase="checkpointing",
        step=11,
        started_at=t0 + 21,
        last_progress_at=t0 + 44,
        last_checkpoint=str(tmp_path / "ck" / "step_11"),
        timestamp=t0 + 46,
    )
    monitor.read_trainer(w)
    write_status(logs, phase="generating", step=11, started_at=t0 + 21, last_progress_at=t0 + 47)
    monitor.read_trainer(w)

    assert [(s.attempt, s.step, s.at, s.reward) for s in store.steps(RUN)] == [(1, 11, t0 + 40, 0.55)]
    marks = [(m.kind, m.at, m.until, m.step) for m in store.marks(RUN)]
    assert marks == [
        ("ray_up", t0 + 20, None, None),
        ("training", t0 + 31, None, None),
        ("validation", t0 + 40.2, t0 + 44, None),
        ("checkpointing", t0 + 44, t0 + 47, None),
        ("checkpoint", t0 + 46, None, 11),
    ]
    store.close()


class Watched:
    """One submitted attempt whose trainer writes metrics.jsonl, watched by a monitor on a fake clock."""

    def __init__(self, tmp_path: Path, *, running: bool = True) -> None:
        self.logs = tmp_path / "trainer-logs"
        (self.logs / "exp_001").mkdir(parents=True)
        built = build(Settings(root=tmp_path / "root"))
        self.store = built.store
        spec = {"name": "toy", "command": ["true"], "trainer_log_dir": str(self.logs)}
        self.store.create_run(RUN, "toy", json.dumps(spec), "spec.yaml")
        self.store.begin_attempt(RUN, lambda n: f"t{n}", {})
        self.store.attempt_submitted(RUN, 1, "4242")
        if running:
            started(self.store)
        attempt, run = self.store.get_attempt(RUN, 1), self.store.get_run(RUN)
        assert attempt is not None and run is not None
        self.t0 = attempt.intent_at
        self.clock = Clock(self.t0 + 30)
        self.monitor = Monitor(self.store, built.settings, built.actions, built.heartbeats, clock=self.clock)
        w = self.monitor.watch_for(run, attempt)
        assert w is not None
        self.w = w

    def append(self, *rows: dict[str, float]) -> None:
        with (self.logs / "exp_001" / "metrics.jsonl").open("a") as fh:
            fh.write("".join(json.dumps(r) + "\n" for r in rows))


def test_an_ended_attempt_still_drained_takes_no_steps_the_next_attempt_writes(tmp_path: Path) -> None:
    """Attempt 1 crashed at step 11; while its files are drained, attempt 2 (resumed from step 10) writes to
    the same metrics.jsonl and status.json: those steps are attempt 2's, never attempt 1's."""
    a = Watched(tmp_path)
    t0 = a.t0
    a.append(*({"step": s, "time": t0 + s, "train/reward_mean": 0.5} for s in range(1, 12)))
    a.monitor.read_trainer(a.w)
    a.w.ended_at = a.clock.now = t0 + 40  # the job ended; its files are drained a while longer
    a.append(*({"step": s, "time": t0 + 50 + s, "train/reward_mean": 0.5} for s in range(11, 15)))
    write_status(a.logs, phase="generating", step=14, started_at=t0 + 45, last_progress_at=t0 + 64)
    a.clock.now = t0 + 65
    a.monitor.read_trainer(a.w)
    assert sorted(s.step for s in a.store.steps(RUN) if s.attempt == 1) == list(range(1, 12))


def test_rows_the_last_attempt_wrote_as_it_died_are_not_the_new_attempts(tmp_path: Path) -> None:
    """The rolled-back attempt's predecessor logged a NaN loss at step 34 while it was being cancelled; the
    new attempt reads on in the shared metrics.jsonl and must not be judged (or shown) by that row."""
    a = Watched(tmp_path)
    a.append({"step": 34, "time": a.t0 - 5, "train/loss": float("nan")})
    assert a.monitor.read_trainer(a.w) == [] and "metrics" not in a.w.progress
    a.append({"step": 33, "time": a.t0 + 20, "train/loss": 0.5})
    a.monitor.read_trainer(a.w)
    assert a.w.progress["metrics"]["train:loss"] == 0.5  # type: ignore[index]


def test_each_metric_keeps_the_step_it_was_logged_at(tmp_path: Path) -> None:
    """Validation is logged every few steps: its value is shown with its own step, not the newest reward's."""
    a = Watched(tmp_path)
    a.append(
        {"step": 10, "time": a.t0 + 10, "train/reward_mean": 0.4, "val/accuracy": 0.5},
        {"step": 12, "time": a.t0 + 12, "train/reward_mean": 0.6},
    )
    a.monitor.read_trainer(a.w)
    assert a.w.progress["metric_steps"]["val:accuracy"] == 10  # type: ignore[index]
    assert a.w.progress["metric_steps"]["train:reward"] == 12  # type: ignore[index]


def test_rows_the_last_attempt_wrote_after_the_resume_was_submitted_are_not_the_new_attempts(
    tmp_path: Path,
) -> None:
    """Slurm calls a scancelled job COMPLETING at once, and the resume is submitted then: the dying trainer
    logged its NaN step 34 a moment after the new attempt's intent. Nothing in the shared file is the new
    attempt's until its job started, and then only what was written since (seen under load: the resumed
    attempt, still pending, was judged by that row and the run gave up)."""
    a = Watched(tmp_path, running=False)
    a.append({"step": 34, "time": a.t0 + 0.5, "train/loss": float("nan")})
    assert a.monitor.read_trainer(a.w) == [] and "metrics" not in a.w.progress  # pending: not read yet
    started(a.store, after_s=6.0)
    a.monitor.sync()
    assert a.monitor.read_trainer(a.w) == [] and "metrics" not in a.w.progress
    a.append({"step": 33, "time": a.t0 + 20, "train/loss": 0.5})
    a.monitor.read_trainer(a.w)
    assert a.w.progress["metrics"]["train:loss"] == 0.5  # type: ignore[index]
