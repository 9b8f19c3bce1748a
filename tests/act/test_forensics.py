"""Before a hung job is cancelled its stacks are taken, bounded in time: a node that does not answer is named
and the decision goes ahead; the summary reaches the alert, the run's events and its folder.

The real act/actions.py and act/forensics.py on a real SQLite store; the nodes (srun) are a scripted fake, the
collector behind `Forensics` an in-memory fake where the collector itself is not what is tested."""

from __future__ import annotations

import dataclasses
import json
import subprocess
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from supervisor.act.actions import Actions
from supervisor.act.forensics import SUMMARY_JSON, SUMMARY_TXT, JobForensics, forensics_dir, latest_forensics
from supervisor.decide.stacks import Frame, ProcStacks, StackSummary, summarise
from supervisor.domain.jobstate import JobState
from supervisor.domain.notices import Notice
from supervisor.domain.observations import StateEvent, Tick
from supervisor.domain.overrides import AttemptOverrides
from supervisor.domain.runs import AttemptRow, RunRow, RunState
from supervisor.rules.engine import Match, MatcherState, feed, load_ruleset, note_files
from supervisor.settings import Settings
from supervisor.slurm.parse import make_job_name
from supervisor.store import Store

NOW = 1_000_000.0
HANG = {"name": "hang_forever", "filename": "/w/trainer/faults.py", "line": 197}
IDLE = {"name": "main_loop", "filename": "/ray/_private/worker.py", "line": 880}


def pyspy(pid: int, frame: dict[str, Any]) -> dict[str, Any]:
    return {
        "pid": pid,
        "cmdline": ["ray::RolloutWorker.generate"],
        "method": "py-spy",
        "threads": [{"pid": pid, "os_thread_id": pid, "thread_name": "MainThread", "frames": [frame]}],
    }


class Nodes:
    """srun as a script: node1 answers like the probe; node2 never answers (a wedged node)."""

    def __init__(self, answering: dict[str, dict[str, Any]], silent: set[str]) -> None:
        self.answering, self.silent = answering, silent
        self.ran: list[tuple[str, str, float]] = []

    async def job_nodes(self, job_id: str) -> str:
        return ",".join([*self.answering, *self.silent])

    async def hostnames(self, nodelist: str) -> list[str]:
        return nodelist.split(",")

    async def run_in_job(
        self, job_id: str, node: str, argv: list[str], *, timeout_s: float
    ) -> subprocess.CompletedProcess[bytes]:
        self.ran.append((job_id, node, timeout_s))
        if node in self.silent:
            await (
                anyio.sleep_forever()
            )  # not even srun's own timeout comes back: the collector's bound ends it
        out = json.dumps(self.answering[node]).encode()
        return subprocess.CompletedProcess(argv, 0, out, b"")


class World:
    """One run with one RUNNING attempt (job 77) and the parts Actions acts through."""

    def __init__(self, tmp: Path, forensics: Any = None) -> None:
        self.store = Store(tmp / "s.sqlite3", clock=lambda: NOW)
        body = {"name": "r1", "command": ["true"], "resume": {"backoff_s": 0}}
        self.store.create_run("r1", "r1", json.dumps(body), str(tmp / "r1.yaml"))
        self.store.begin_attempt("r1", lambda n: make_job_name("r1", n), {})
        self.store.attempt_submitted("r1", 1, "77")
        self.store.observe_attempt("r1", 1, slurm_state="RUNNING", reason=None, nodes="node1", started=True)
        self.store.set_run_state("r1", RunState.RUNNING)
        self.settings = Settings(root=tmp / "root")
        self.settings.ensure_dirs()
        self.order: list[str] = []
        self.notices: list[Notice] = []
        self.scheduled: list[AttemptOverrides] = []
        world = self

        class Slurm:
            async def cancel(self, job_id: str) -> None:
                world.order.append(f"cancel {job_id}")

            async def hold(self, job_id: str) -> None: ...

            async def release(self, job_id: str) -> None: ...

            async def job_nodes(self, job_id: str) -> str:
                return "node1"

        class Scheduler:
            def schedule(self, run_id: str, *, at: float, overrides: AttemptOverrides, reason: str) -> None:
                world.scheduled.append(overrides)

            def wake(self) -> None: ...

        class Sink:
            def publish(self, notice: Notice) -> None:
                world.notices.append(notice)

            def publish_plot(self, run_id: str, png: str, title: str) -> None: ...

        self.actions = Actions(
            self.store, Slurm(), Scheduler(), Sink(), self.settings, clock=lambda: NOW, forensics=forensics
        )

    @property
    def run(self) -> RunRow:
        run = self.store.get_run("r1")
        assert run is not None
        return run

    @property
    def attempt(self) -> AttemptRow:
        attempt = self.store.get_attempt("r1", 1)
        assert attempt is not None
        return attempt

    async def decide_with_forensics_running(self, m: Match) -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(self.actions.run_forensics)
            await anyio.lowlevel.checkpoint()  # the task starts and takes investigations
            assert self.actions._investigating
            await self.actions.on_match(self.run, self.attempt, m)
            assert self.store.decisions("r1")[0].outcome == ""  # recorded, waiting for its stacks
            with anyio.fail_after(60):  # a bound for a broken build, not a speed assertion
                while not self.store.decisions("r1")[0].outcome:  # noqa: ASYNC110 (the store has no event)
                    await anyio.sleep(0.01)
            tg.cancel_scope.cancel()


def stall() -> Match:
    st = MatcherState(run_id="r1", attempt=1)
    rs = load_ruleset()
    feed(rs, st, StateEvent("r1", 1, "77", JobState.RUNNING, nodes="node1", at=NOW))
    note_files(st, ["STARTED_RAY_HEAD", "ray-driver.log"])
    (m,) = [m for m in feed(rs, st, Tick(NOW + 31 * 60)) if m.rule == "rollouts-stalled"]
    return m


class FakeForensics:
    def __init__(self, world_order: list[str], fail: bool = False) -> None:
        self.order, self.fail = world_order, fail
        self.asked: list[tuple[str, int, str]] = []
        self.timeouts: list[float | None] = []

    async def capture(
        self, run: RunRow, attempt: AttemptRow, reason: str, *, timeout_s: float | None = None
    ) -> StackSummary | None:
        self.asked.append((run.id, attempt.n, reason))
        self.timeouts.append(timeout_s)
        self.order.append("forensics")
        if self.fail:
            raise RuntimeError("the collector broke")
        hung = (("MainThread", (Frame("hang_forever", "faults.py", 197),)),)
        idle = (("MainThread", (Frame("main_loop", "worker.py", 880),)),)
        return summarise(
            [ProcStacks("node1", p, "RolloutWorker", "py-spy", hung) for p in (1, 2, 3)]
            + [ProcStacks("node2", 4, "RolloutWorker", "py-spy", idle)]
        )


def test_a_node_that_does_not_answer_is_named_and_the_capture_still_ends(tmp_path: Path) -> None:
    w = World(tmp_path)
    answer = {
        "node": "node1",
        "processes": [pyspy(11, HANG), pyspy(12, HANG), pyspy(13, HANG), pyspy(14, IDLE)],
    }
    nodes = Nodes({"node1": answer}, silent={"node2"})
    collector = JobForensics(nodes, w.settings.runs_dir, timeout_s=0.2, grace_s=0.1)

    summary = anyio.run(collector.capture, w.run, w.attempt, "no progress for 5 min in generation")

    assert summary is not None and summary.unanswered == ("node2",)
    assert summary.waiting_place == "hang_forever (faults.py:197)" and summary.waiting == 3
    assert "node2: did not answer within 0.3s" in summary.notes
    assert {node for _, node, _ in nodes.ran} == {"node1", "node2"}
    folder = forensics_dir(w.settings.runs_dir, "r1", 1)
    assert latest_forensics(w.settings.runs_dir, "r1") == folder
    assert "hang_forever (faults.py:197)" in (folder / "stacks.txt").read_text()
    assert (folder / SUMMARY_TXT).read_text().startswith("no progress for 5 min in generation\n")
    assert json.loads((folder / SUMMARY_JSON).read_text())["unanswered"] == ["node2"]
    assert json.loads((folder / "node-node1.json").read_text())["node"] == "node1"


def test_a_node_list_slurm_cannot_give_leaves_an_empty_summary_not_an_error(tmp_path: Path) -> None:
    w = World(tmp_path)

    class Broken(Nodes):
        async def job_nodes(self, job_id: str) -> str:
            raise RuntimeError("squeue did not answer within 30s")

    summary = anyio.run(
        JobForensics(Broken({}, set()), w.settings.runs_dir).capture, w.run, w.attempt, "hang"
    )
    assert summary is not None and summary.processes == 0
    assert any("the job's nodes are unknown" in n for n in summary.notes)


def test_a_hang_is_investigated_before_the_cancel_and_the_alert_carries_the_summary(tmp_path: Path) -> None:
    w = World(tmp_path)
    fake = FakeForensics(w.order)
    w.actions.forensics = fake
    anyio.run(w.decide_with_forensics_running, stall())
    assert w.order == ["forensics", "cancel 77"]
    assert fake.asked[0][:2] == ("r1", 1) and fake.timeouts == [None]  # the collector's full timeout_s
    (notice,) = w.notices
    assert "3 of 4 RolloutWorker wait in hang_forever (faults.py:197)" in notice.fields["stacks"]
    assert notice.fields["exclude_node"] == "node2"
    assert "Stacks:" in notice.text
    assert [e.kind for e in w.store.events("r1")].count("forensics") == 1
    assert len(w.scheduled) == 1  # and the run resumes


def test_a_broken_collector_does_not_stop_the_decision(tmp_path: Path) -> None:
    w = World(tmp_path)
    w.actions.forensics = FakeForensics(w.order, fail=True)
    anyio.run(w.decide_with_forensics_running, stall())
    assert w.order == ["forensics", "cancel 77"]
    (notice,) = w.notices
    assert "stacks" not in notice.fields
    assert "cancelled job 77" in w.store.decisions("r1")[0].outcome


@pytest.mark.parametrize("category_is_stall", [True, False])
def test_without_the_forensics_task_or_for_other_failures_the_decision_is_immediate(
    tmp_path: Path, category_is_stall: bool
) -> None:
    w = World(tmp_path)
    w.actions.forensics = FakeForensics(w.order)
    m = stall()
    if not category_is_stall:
        m = dataclasses.replace(m, category="failure")
    anyio.run(w.actions.on_match, w.run, w.attempt, m)  # no run_forensics task: nothing would ever take it
    assert w.order == ["cancel 77"]


def test_a_failure_that_ends_a_running_job_is_investigated_first_within_the_cheaper_bound(
    tmp_path: Path,
) -> None:
    w = World(tmp_path)
    fake = FakeForensics(w.order)
    w.actions.forensics = fake
    oom = dataclasses.replace(stall(), category="failure", rule="cuda-oom")
    anyio.run(w.decide_with_forensics_running, oom)
    assert w.order == ["forensics", "cancel 77"]
    assert fake.timeouts == [w.settings.forensics.failure_timeout_s]  # a hang gets the full timeout_s
    assert "Stacks:" in w.notices[0].text


def test_a_failure_that_only_alerts_takes_no_stacks(tmp_path: Path) -> None:
    w = World(tmp_path)
    fake = FakeForensics(w.order)
    w.actions.forensics = fake
    m = stall()
    warn = dataclasses.replace(
        m, category="failure", actions=tuple(a for a in m.actions if a.kind == "alert")
    )

    async def decide() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(w.actions.run_forensics)
            await anyio.lowlevel.checkpoint()
            await w.actions.on_match(w.run, w.attempt, warn)
            tg.cancel_scope.cancel()

    anyio.run(decide)
    assert fake.asked == [] and w.order == []
    assert w.store.decisions("r1")[0].outcome == "alerted"
