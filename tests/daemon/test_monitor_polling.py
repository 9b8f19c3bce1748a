"""On a shared filesystem the monitor watches a run through the polling plan: a pending job's paths cost
nothing, its folders are known from the poller's own listings (no listing of the monitor's own), and a
budget that cannot cover the base interval is said in the log and in `shepherd status`."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest
from structlog.testing import capture_logs

from supervisor.cli.main import main
from supervisor.daemon.compose import Built, build
from supervisor.domain.jobstate import JobState
from supervisor.domain.observations import StateEvent
from supervisor.domain.runs import AttemptRow, RunRow
from supervisor.settings import Settings, WatchSettings
from supervisor.watch.fswatch import FsInfo

RUN = "toy-20260101-000000-abcd"
JOB = "4242"


def polled(tmp_path: Path, trainer_log_dir: Path | None = None, **watch: float) -> Built:
    settings = Settings(root=tmp_path / "root", watch=WatchSettings(force_polling=True, **watch))
    built = build(settings)
    spec: dict[str, object] = {"name": "toy", "command": ["true"]}
    if trainer_log_dir is not None:
        spec["trainer_log_dir"] = str(trainer_log_dir)
    built.store.create_run(RUN, "toy", json.dumps(spec), "spec.yaml")
    built.store.begin_attempt(RUN, lambda n: f"t{n}", {})
    built.store.attempt_submitted(RUN, 1, JOB)
    return built


def rows(built: Built) -> tuple[RunRow, AttemptRow]:
    run, attempt = built.store.get_run(RUN), built.store.get_attempt(RUN, 1)
    assert run is not None and attempt is not None
    return run, attempt


def poll_rounds(built: Built, n: int = 5) -> set[str]:
    """A few rounds of the poller, a minute apart (every check is due: the plan's pacing is not under
    test here), handed to the monitor as its change loop would."""
    seen: set[str] = set()
    src = built.monitor.changes
    for _ in range(n):
        later = src.clock() + 60
        src.clock = lambda later=later: later  # type: ignore[misc]
        changed = src.poll_due()
        seen |= changed
        anyio.run(built.monitor.on_changes, changed)
    return seen


def test_a_pending_jobs_paths_are_paused_until_it_runs(tmp_path: Path) -> None:
    built = polled(tmp_path)
    built.store.observe_attempt(RUN, 1, slurm_state=JobState.PENDING.value, reason="Priority", nodes=None)
    run, attempt = rows(built)
    w = built.monitor.watch_for(run, attempt)
    assert w is not None and w.mode == "poll"
    load = built.monitor.changes.load()
    assert load.paused >= 2 and load.files == 0  # the output file and the log base, not looked at
    assert built.monitor.changes.poll_due() == set()

    running = StateEvent(RUN, 1, JOB, JobState.RUNNING)
    anyio.run(built.monitor.on_state, run, attempt, running)
    assert built.monitor.changes.load().paused == 0
    built.store.close()


def test_log_folders_come_from_the_pollers_listings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    built = polled(tmp_path)
    run, attempt = rows(built)
    logs = built.settings.runs_dir / RUN / "logs"
    (logs / f"{JOB}-logs").mkdir(parents=True)
    (logs / f"{JOB}-logs" / "ray-driver.log").write_text("step 1\n")
    (logs / f"{JOB}-logs" / "ENDED").touch()

    # the monitor itself neither lists nor globs a polled folder: the plan paces and pays for listings
    def no_listing(self: Path, *a: object) -> object:
        raise AssertionError(f"the monitor listed {self} itself")

    monkeypatch.setattr(Path, "iterdir", no_listing)
    monkeypatch.setattr(Path, "glob", no_listing)
    w = built.monitor.watch_for(run, attempt)
    assert w is not None
    poll_rounds(built)
    driver = str(logs / f"{JOB}-logs" / "ray-driver.log")
    assert driver in w.files
    assert built.monitor.changes.mode(driver) == "poll"
    assert "ENDED" in (built.monitor._entries(w, logs / f"{JOB}-logs"))
    built.store.close()


def test_trainer_files_are_polled_on_the_progress_cadence_and_read_when_they_changed(tmp_path: Path) -> None:
    trainer = tmp_path / "trainer"
    tb = trainer / "exp_001" / "tensorboard"
    tb.mkdir(parents=True)
    (trainer / "exp_001" / "metrics.jsonl").write_text('{"step": 1, "train/loss": 0.5}\n')
    (tb / "events.out.tfevents.1.host").write_bytes(b"")
    (trainer / "status.json").write_text('{"phase": "generating", "step": 1}')
    built = polled(tmp_path, trainer_log_dir=trainer)
    run, attempt = rows(built)
    w = built.monitor.watch_for(run, attempt)
    assert w is not None
    poll_rounds(built)
    plan = built.monitor.changes.plan
    for name in ("status.json", "exp_001/metrics.jsonl", "exp_001/tensorboard/events.out.tfevents.1.host"):
        assert plan.targets[str(trainer / name)].kind == "progress", name
    assert plan.targets[str(tb)].kind == "listing"

    w.trainer_due = False  # read by a tick
    poll_rounds(built, 2)
    assert not w.trainer_due  # nothing changed: the tick reads no trainer file
    with (trainer / "exp_001" / "metrics.jsonl").open("a") as fh:
        fh.write('{"step": 2, "train/loss": 0.4}\n')
    poll_rounds(built, 1)
    assert w.trainer_due

    w.trainer_due, w.tb_rescan = False, False
    (trainer / "exp_002" / "tensorboard").mkdir(parents=True)  # a resumed launch's new exp dir
    poll_rounds(built, 3)
    assert w.trainer_due and w.tb_rescan
    assert str(trainer / "exp_002" / "tensorboard") in w.trainer_paths
    built.store.close()


def test_an_over_budget_poller_says_so_in_the_log_and_in_status(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    built = polled(tmp_path, poll_budget_ops_per_s=0.1)  # a budget no run fits in
    run, attempt = rows(built)
    logs = built.settings.runs_dir / RUN / "logs" / f"{JOB}-logs"
    logs.mkdir(parents=True)
    for name in ("ray-driver.log", "ray-worker-0.log", "ray-worker-1.log"):
        (logs / name).write_text("x\n")
    w = built.monitor.watch_for(run, attempt)
    assert w is not None
    poll_rounds(built)
    with capture_logs() as logged:
        load = built.monitor.note_load(1000.0)
        built.monitor.note_load(1010.0)  # not repeated at every tick
    assert not load.covered
    warnings = [e for e in logged if "cannot cover" in e["event"]]
    assert len(warnings) == 1 and warnings[0]["budget_ops_per_s"] == 0.1

    saved = json.loads(built.settings.watch_load_path.read_text())
    saved["at"] = time.time()  # as if the daemon wrote it just now
    built.settings.watch_load_path.write_text(json.dumps(saved))
    built.store.close()
    assert main(["--root", str(built.settings.root), "status"]) == 0
    out = capsys.readouterr().out
    assert "watching: polling needs" in out and "budget is 0 (watch.poll_budget_ops_per_s)" in out


def test_status_says_nothing_about_polling_when_the_budget_covers_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    built = polled(tmp_path)
    built.monitor.note_load(time.time())
    assert json.loads(built.settings.watch_load_path.read_text())["covered"] is True
    built.store.close()
    assert main(["--root", str(built.settings.root), "status"]) == 0
    assert "watching" not in capsys.readouterr().out


def test_a_maximum_interval_below_the_base_interval_is_refused() -> None:
    with pytest.raises(ValueError, match="poll_max_interval_s"):
        WatchSettings(poll_interval_s=5, poll_max_interval_s=2)


def test_a_round_of_changes_of_many_runs_saves_their_cursors_in_one_transaction(tmp_path: Path) -> None:
    built = build(Settings(root=tmp_path / "root"))
    store, monitor = built.store, built.monitor
    outputs = []
    for i in range(20):
        run_id = f"toy-20260101-000000-{i:04d}"
        store.create_run(run_id, "toy", json.dumps({"name": "toy", "command": ["true"]}), "spec.yaml")
        store.begin_attempt(run_id, lambda n, i=i: f"t{i}-{n}", {})
        store.attempt_submitted(run_id, 1, str(5000 + i))
        run, attempt = store.get_run(run_id), store.get_attempt(run_id, 1)
        assert run is not None and attempt is not None
        w = monitor.watch_for(run, attempt)
        assert w is not None
        out = w.output_file()
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text("step 1 done\nstep 2 done\n")
        outputs.append(str(out))
    statements: list[str] = []
    store.db.set_trace_callback(statements.append)

    async def one_round() -> None:
        with monitor.cursors.batch():
            await monitor.on_changes(set(outputs))

    anyio.run(one_round)
    store.db.set_trace_callback(None)
    assert [s for s in statements if s.startswith("BEGIN")] == ["BEGIN IMMEDIATE"]
    assert all(store.load_cursor(p) == (os.stat(p).st_ino, 24, 2) for p in outputs)
    store.close()


async def eventually(check: Callable[[], bool]) -> None:
    for _ in range(200):  # a 10 s hang guard, not a latency assertion
        if check():
            return
        await anyio.sleep(0.05)
    raise AssertionError("not within 10 s")


@pytest.mark.anyio
async def test_a_live_monitor_on_a_polled_run_reads_a_new_line(tmp_path: Path) -> None:
    built = polled(tmp_path, poll_interval_s=0.05, poll_max_interval_s=0.5)
    run, attempt = rows(built)
    w = built.monitor.watch_for(run, attempt)
    assert w is not None
    out = w.output_file()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("starting\n")

    def read_to(offset: int) -> bool:
        c = built.monitor.follower.cursor(str(out))
        return c is not None and c.offset >= offset

    async with anyio.create_task_group() as tg:
        tg.start_soon(built.monitor.run)
        await eventually(lambda: read_to(9))
        with out.open("a") as fh:
            fh.write("step 2\n")
        await eventually(lambda: read_to(16))
        tg.cancel_scope.cancel()
    assert built.monitor.changes.mode(out) == "poll"
    built.store.close()


def test_an_adopted_jobs_output_on_a_shared_filesystem_makes_the_whole_run_polled(tmp_path: Path) -> None:
    built = build(Settings(root=tmp_path / "root"))
    shared = tmp_path / "lustre"
    built.monitor.changes.detect = lambda p: FsInfo(0x0BD00BD0, "lustre", str(p).startswith(str(shared)))
    spec = {"name": "toy", "command": ["true"]}
    built.store.create_run(RUN, "toy", json.dumps(spec), "spec.yaml")
    built.store.begin_attempt(
        RUN, lambda n: f"t{n}", {"adopted": True, "output": str(shared / "slurm-7.out")}
    )
    built.store.attempt_submitted(RUN, 1, JOB)
    run, attempt = rows(built)
    w = built.monitor.watch_for(run, attempt)
    assert w is not None and w.mode == "poll"
    assert built.monitor.changes.mode(shared / "slurm-7.out") == "poll"
    built.store.close()


def test_the_ended_check_of_a_polled_run_reads_the_pollers_listing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    built = polled(tmp_path)
    run, attempt = rows(built)
    logs = built.settings.runs_dir / RUN / "logs" / f"{JOB}-logs"
    logs.mkdir(parents=True)
    (logs / "STARTED_RAY_HEAD").touch()
    w = built.monitor.watch_for(run, attempt)
    assert w is not None
    poll_rounds(built)

    def no_listing(self: Path, *a: object) -> object:
        raise AssertionError(f"the monitor listed {self} itself")

    monkeypatch.setattr(Path, "iterdir", no_listing)
    monkeypatch.setattr(Path, "glob", no_listing)
    w.state.job_state = JobState.RUNNING
    w.driver_exited_at = 100.0
    [m] = built.monitor.check_ended(w, 10_000.0)
    assert m.rule == "ended-not-written" and f"job {JOB} is RUNNING" in m.excerpt
    built.store.close()


def test_paths_two_attempts_share_stay_watched_when_the_first_is_dropped(tmp_path: Path) -> None:
    trainer = tmp_path / "trainer"
    (trainer / "exp_001").mkdir(parents=True)
    (trainer / "status.json").write_text('{"phase": "generating", "step": 1}')
    built = polled(tmp_path, trainer_log_dir=trainer)
    run, first = rows(built)
    w1 = built.monitor.watch_for(run, first)
    assert w1 is not None
    poll_rounds(built)
    built.store.begin_attempt(RUN, lambda n: f"t{n}", {})  # the resume, while the first still drains
    built.store.attempt_submitted(RUN, 2, "4343")
    second = built.store.get_attempt(RUN, 2)
    assert second is not None
    w2 = built.monitor.watch_for(run, second)
    assert w2 is not None
    poll_rounds(built)
    status = str(trainer / "status.json")
    assert status in w2.trainer_paths
    built.monitor._drop(w1)
    assert built.monitor.changes.mode(status) == "poll"  # still watched, now for the second attempt
    assert built.monitor._by_path[status] == w2.key
    assert built.monitor.changes.mode(w2.log_base) == "poll"
    built.store.close()
