"""sacct down (slurmdbd stopped) while squeue answers: the end is settled from squeue, the daemon says why
the exit code is missing, and records it once sacct answers.

The real outage: tests/integration/test_slurmdbd_down.py.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import anyio

from supervisor.daemon.compose import build
from supervisor.daemon.loops import Daemon
from supervisor.domain.jobstate import JobState
from supervisor.domain.runs import RunState
from supervisor.settings import Settings
from supervisor.slurm.client import SlurmClient, SlurmUnavailable
from supervisor.slurm.parse import JobObservation, make_comment, make_job_name
from supervisor.store import Store


class FakeSlurm(SlurmClient):
    def __init__(self) -> None:
        super().__init__(user="root")
        self.queue: list[JobObservation] = []
        self.accounting: list[JobObservation] | None = None  # None: sacct fails like with slurmdbd down
        self.sacct_calls = 0

    async def squeue(self) -> list[JobObservation]:
        return list(self.queue)

    async def sacct(self, job_ids: Iterable[str] = (), names: Iterable[str] = ()) -> list[JobObservation]:
        self.sacct_calls += 1
        if self.accounting is None:
            raise SlurmUnavailable(
                "sacct exited 1: sacct: error: Problem talking to the database: Connection refused"
            )
        ids = set(job_ids)
        return [o for o in self.accounting if o.job_id in ids]


SPEC = '{"name": "r1", "command": ["true"]}'


def daemon_of(settings: Settings, store: Store, slurm: FakeSlurm, now: list[float]) -> Daemon:
    return build(settings, store=store, slurm=slurm, clock=lambda: now[0]).daemon


def job(state: JobState, exit_code: int | None = None, source: str = "squeue") -> JobObservation:
    return JobObservation(
        "77",
        make_job_name("r1", 1),
        state,
        comment=make_comment("r1", 1),
        nodes="node1",
        start_time="2026-01-01T00:00:00",
        exit_code=exit_code,
        signal=0 if exit_code is not None else None,
        source=source,
    )


def test_an_end_seen_only_by_squeue_is_settled_and_its_exit_code_recorded_when_sacct_is_back(
    tmp_path: Path,
) -> None:
    now = [1000.0]
    store = Store(tmp_path / "s.sqlite3", clock=lambda: now[0])
    slurm = FakeSlurm()
    daemon = daemon_of(Settings(root=tmp_path / "root"), store, slurm, now)
    store.create_run("r1", "r1", SPEC, str(tmp_path / "spec.yaml"))
    store.begin_attempt("r1", lambda n: make_job_name("r1", n), {})
    store.attempt_submitted("r1", 1, "77")

    def run_state() -> RunState:
        run = store.get_run("r1")
        assert run is not None
        return run.state

    def poll() -> None:
        assert anyio.run(daemon.poll_once)
        now[0] += 5

    slurm.queue = [job(JobState.RUNNING)]
    poll()
    assert slurm.sacct_calls == 0 and run_state() == RunState.RUNNING

    slurm.queue = [job(JobState.COMPLETED)]  # the job ended; slurmdbd is down
    poll()
    assert daemon.accounting_down_since is not None
    assert "accounting: sacct unavailable" in daemon.status_line()
    # The rules complete the run on squeue's terminal state at once; the attempt waits for sacct first.
    assert run_state() == RunState.COMPLETED
    waiting = store.get_attempt("r1", 1)
    assert waiting is not None and waiting.ended_at is None
    for _ in range(7):  # 30 s later squeue's word settles it, without the exit code
        poll()
    run = store.get_run("r1")
    attempt = store.get_attempt("r1", 1)
    assert run is not None and run.state == RunState.COMPLETED
    assert attempt is not None and attempt.slurm_state == "COMPLETED" and attempt.exit_code is None
    [ended] = [e for e in store.events("r1") if e.kind == "ended"]
    assert "Slurm accounting (sacct) unavailable" in ended.message and ended.data["exit_code_owed"]
    assert ("r1", 1) in daemon.exit_codes_owed

    slurm.queue = []  # MinJobAge passed; slurmdbd is back
    slurm.accounting = [job(JobState.COMPLETED, exit_code=0, source="sacct")]
    poll()
    attempt = store.get_attempt("r1", 1)
    assert attempt is not None and attempt.exit_code == 0
    assert daemon.accounting_down_since is None and not daemon.exit_codes_owed
    assert "accounting" not in daemon.status_line()
    [late] = [e for e in store.events("r1") if e.kind == "exit-code"]
    assert "exit code recorded: exit 0" in late.message and "recorded from sacct" in late.message
    assert run_state() == RunState.COMPLETED
    assert [a.n for a in store.attempts("r1")] == [1]


def ended_during_outage(tmp_path: Path, now: list[float]) -> tuple[Store, FakeSlurm, Settings]:
    """A daemon saw attempt r1/1 end with slurmdbd down and settled it on squeue's word: its code is owed."""
    store = Store(tmp_path / "s.sqlite3", clock=lambda: now[0])
    slurm = FakeSlurm()
    settings = Settings(root=tmp_path / "root")
    first = daemon_of(settings, store, slurm, now)
    store.create_run("r1", "r1", SPEC, str(tmp_path / "spec.yaml"))
    store.begin_attempt("r1", lambda n: make_job_name("r1", n), {})
    store.attempt_submitted("r1", 1, "77")
    slurm.queue = [job(JobState.COMPLETED)]
    for _ in range(8):
        assert anyio.run(first.poll_once)
        now[0] += 5
    assert ("r1", 1) in first.exit_codes_owed
    return store, slurm, settings


def test_a_daemon_restarted_during_the_outage_still_records_the_owed_exit_code(tmp_path: Path) -> None:
    now = [1000.0]
    store, slurm, settings = ended_during_outage(tmp_path, now)
    restarted = daemon_of(settings, store, slurm, now)  # the first one was SIGKILLed
    assert ("r1", 1) in restarted.exit_codes_owed
    slurm.queue = []
    slurm.accounting = [job(JobState.COMPLETED, exit_code=3, source="sacct")]
    assert anyio.run(restarted.poll_once)
    attempt = store.get_attempt("r1", 1)
    assert attempt is not None and attempt.exit_code == 3
    assert not restarted.exit_codes_owed
    assert len([e for e in store.events("r1") if e.kind == "exit-code"]) == 1


def test_exit_codes_owed_for_more_than_a_day_are_no_longer_asked_for_after_a_restart(tmp_path: Path) -> None:
    now = [1000.0]
    store, slurm, settings = ended_during_outage(tmp_path, now)
    now[0] += 2 * 86400
    assert not daemon_of(settings, store, slurm, now).exit_codes_owed
