"""`shepherd logs`: any attempt's log, the failed attempt's while the next waits, --tail and --grep, and a
follow that waits for a pending job's file, goes on into the next attempt with a marker line, and ends with
the run."""

from __future__ import annotations

import io
import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from supervisor.cli.logs import (
    LineFilter,
    Shower,
    default_attempt,
    driver_run_lines,
    follow,
    last_lines,
    marker,
    pick_file,
)
from supervisor.cli.main import main
from supervisor.domain.runs import AttemptRow, AttemptState, RunState
from supervisor.settings import Settings
from supervisor.store import Store

RUN = "toy-20261127-000000-abcd"


def attempt(n: int, **kw: object) -> AttemptRow:
    fields: dict[str, object] = {
        "run_id": RUN,
        "n": n,
        "tag": f"t{n}",
        "state": AttemptState.SUBMITTED,
        "job_id": str(100 + n),
        "intent_at": float(n),
        "submitted_at": float(n),
        "started_at": None,
        "ended_at": None,
        "slurm_state": "PENDING",
        "reason": None,
        "exit_code": None,
        "nodes": None,
        "checkpoint": None,
        "overrides_json": None,
        "unknown_since": None,
        "last_seen_at": None,
    }
    fields.update(kw)
    return AttemptRow(**fields)  # type: ignore[arg-type]


FAILED_1 = attempt(
    1, started_at=2.0, ended_at=3.0, slurm_state="FAILED", exit_code=1, state=AttemptState.ENDED
)


def test_after_a_failure_the_failed_attempt_is_shown_until_the_next_one_runs() -> None:
    assert default_attempt([FAILED_1, attempt(2)]) == FAILED_1
    assert default_attempt([FAILED_1, attempt(2, job_id=None, submitted_at=None)]) == FAILED_1
    running = attempt(2, started_at=5.0, slurm_state="RUNNING")
    assert default_attempt([FAILED_1, running]) == running


def test_a_run_whose_only_job_is_pending_shows_that_job_and_a_run_without_jobs_none() -> None:
    assert default_attempt([attempt(1)]) == attempt(1)
    assert default_attempt([attempt(1, job_id=None)]) is None


def test_the_driver_log_is_the_default_file_and_the_output_file_stands_in_when_ray_never_came_up() -> None:
    out, driver, head = Path("slurm-101.out"), Path("101-logs/ray-driver.log"), Path("101-logs/ray-head.log")
    assert pick_file([out, driver, head], None, ended=False) == driver
    assert pick_file([out, head], None, ended=False) is None  # running: its driver log is still to come
    assert pick_file([out, head], None, ended=True) == head
    assert pick_file([out, driver, head], "slurm", ended=False) == out
    assert pick_file([out], "worker", ended=True) is None


def test_a_marker_line_says_which_attempt_and_how_it_ended() -> None:
    assert marker(attempt(2, checkpoint="/ck/step_20")) == "==> attempt 2, job 102, from step_20 <=="
    assert marker(FAILED_1) == "==> attempt 1, job 101, FAILED exit 1 <=="


def test_tail_keeps_the_last_lines_and_grep_whole_lines_however_they_arrive() -> None:
    assert last_lines(b"a\nb\nc", 2) == b"b\nc"
    assert last_lines(b"a\nb\n", 0) == b""
    lines = LineFilter(re.compile(rb"loss"))
    assert lines.feed(b"step 1 lo") == b""
    assert lines.feed(b"ss 0.5\nstep 2\nloss 0.4") == b"step 1 loss 0.5\n"
    assert lines.flush() == b"loss 0.4"


# ---- against a store and files -------------------------------------------------------------------------
def settings(tmp_path: Path) -> Settings:
    s = Settings(root=tmp_path / "root")
    s.ensure_dirs()
    return s


def driver_log(s: Settings, job: str) -> Path:
    p = s.runs_dir / RUN / "logs" / f"{job}-logs" / "ray-driver.log"
    p.parent.mkdir(parents=True, exist_ok=True)
    return p


def new_run(s: Settings) -> Store:
    store = Store(s.db_path)
    store.create_run(RUN, "toy", json.dumps({"name": "toy", "command": ["true"]}), "/x")
    return store


def submit(store: Store, job: str) -> int:
    a = store.begin_attempt(RUN, lambda n: f"t{n}", {})
    store.attempt_submitted(RUN, a.n, job)
    return a.n


def end(store: Store, n: int, state: str, code: int) -> None:
    store.observe_attempt(RUN, n, slurm_state=state, reason=None, nodes="n1", exit_code=code, ended=True)


def test_follow_waits_for_the_first_file_goes_on_into_the_next_attempt_and_ends_with_the_run(
    tmp_path: Path,
) -> None:
    s = settings(tmp_path)
    store = new_run(s)
    submit(store, "101")
    store.observe_attempt(RUN, 1, slurm_state="PENDING", reason="Resources", nodes=None)
    said: list[str] = []

    def starts() -> None:
        store.observe_attempt(RUN, 1, slurm_state="RUNNING", reason=None, nodes="n1", started=True)
        driver_log(s, "101").write_bytes(b"step 1\nstep ")

    def fails() -> None:
        with driver_log(s, "101").open("ab") as f:
            f.write(b"2\nCUDA out of memory\n")
        end(store, 1, "FAILED", 1)

    def resumed() -> None:
        submit(store, "102")

    def second_writes() -> None:
        driver_log(s, "102").write_bytes(b"step 3\n")

    def completes() -> None:
        with driver_log(s, "102").open("ab") as f:
            f.write(b"step 4\n")
        end(store, 2, "COMPLETED", 0)
        store.set_run_state(RUN, RunState.COMPLETED, reason="completed")

    world: list[Callable[[], None]] = [starts, fails, resumed, second_writes, completes]

    def sleep(_s: float) -> None:
        assert world, "follow kept waiting after the run ended"
        world.pop(0)()

    out = io.BytesIO()
    assert follow(store, s, RUN, 1, None, Shower(out, LineFilter(), None), sleep=sleep, say=said.append) == 0
    assert out.getvalue().decode().splitlines() == [
        "==> attempt 1, job 101 <==",
        "step 1",
        "step 2",
        "CUDA out of memory",
        "==> attempt 2, job 102 <==",
        "step 3",
        "step 4",
    ]
    assert said == [
        "waiting for attempt 1 (job 101, PENDING: Resources) to write its log",
        "attempt 1 ended (FAILED); waiting for the next",
        "waiting for attempt 2 (job 102, submitted) to write its log",
        f"{RUN} is COMPLETED (completed)",
    ]
    assert not world


def test_follow_of_a_run_that_ended_without_a_file_says_so_and_stops(tmp_path: Path) -> None:
    s = settings(tmp_path)
    store = new_run(s)
    n = submit(store, "101")
    end(store, n, "CANCELLED", 0)
    store.set_run_state(RUN, RunState.CANCELLED, reason="cancelled by cli:alice")
    said: list[str] = []
    out = io.BytesIO()

    def never(_s: float) -> None:
        raise AssertionError("nothing to wait for")

    assert follow(store, s, RUN, 1, None, Shower(out, LineFilter(), None), sleep=never, say=said.append) == 0
    assert said == [f"{RUN} is CANCELLED (cancelled by cli:alice)"]


def test_logs_shows_the_attempt_asked_for_its_last_lines_and_its_matching_lines(
    tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    s = settings(tmp_path)
    store = new_run(s)
    end(store, submit(store, "101"), "FAILED", 1)
    driver_log(s, "101").write_bytes(b"step 1 loss 0.9\nstep 2 loss 0.8\nTraceback\nCUDA out of memory\n")
    submit(store, "102")  # pending: no file yet
    store.close()
    root = str(s.root)

    assert main(["--root", root, "logs", "toy"]) == 0  # the failed attempt, while the next one waits
    got = capsysbinary.readouterr()
    assert got.out.endswith(b"CUDA out of memory\n")
    assert b"attempt 2 (job 102) has not started; showing attempt 1\n" in got.err
    assert b"==> attempt 1, job 101, FAILED exit 1 <==" in got.err

    assert main(["--root", root, "logs", "toy", "--attempt", "1", "--tail", "2"]) == 0
    assert capsysbinary.readouterr().out == b"Traceback\nCUDA out of memory\n"
    assert main(["--root", root, "logs", "toy", "--attempt", "1", "--grep", "loss", "--tail", "1"]) == 0
    assert capsysbinary.readouterr().out == b"step 2 loss 0.8\n"

    assert main(["--root", root, "logs", "toy", "--attempt", "2"]) == 1
    assert b"no log file yet for attempt 2" in capsysbinary.readouterr().err
    assert main(["--root", root, "logs", "toy", "--attempt", "7"]) == 1
    assert b"has no attempt 7 (attempts: 1, 2)" in capsysbinary.readouterr().err
    assert main(["--root", root, "logs", "toy", "--grep", "("]) == 2


def test_logs_of_an_attempt_restarted_in_place_show_only_its_driver_run() -> None:
    log = (
        b"shepherd-runner [2026-11-27 16:00:00]: driver run 1 starting (attempt 1); Shepherd's files in /x\n"
        b"step 1\nNCCL error\n"
        b"shepherd-runner [2026-11-27 16:00:05]: driver run 1 exited with code 1\n"
        b"shepherd-runner [2026-11-27 16:00:09]: driver run 2 starting in place (attempt 2)\n"
        b"step 2\ntraining finished\n"
    )
    first, second = driver_run_lines(log, 1), driver_run_lines(log, 2)
    assert b"NCCL error" in first and b"exited with code 1" in first and b"step 2" not in first
    assert second.startswith(b"shepherd-runner [2026-11-27 16:00:09]: driver run 2") and b"NCCL" not in second
    assert driver_run_lines(b"no runner here\n", 1) == b"no runner here\n"
    assert driver_run_lines(log, 3) == b""
