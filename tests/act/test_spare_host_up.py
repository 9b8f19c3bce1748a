"""A spare node takes a GPU fault's place only while the faulty node's host still runs: the fault line says
the host was up when it printed it, Slurm says whether it still is (`State=DOWN` or not responding: the job
goes back through Slurm with `--exclude`; DRAIN or FAIL, flags a health check sets on a live host, do not).

The real act/actions.py on a real SQLite store, the real rules on the stand-in trainer's fault line; Slurm is
a fake that reports the node's state as `scontrol -o show node` did on the dev cluster."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import anyio
import pytest

from supervisor.act.actions import Actions
from supervisor.domain.runs import RunState
from supervisor.rules.engine import Match, MatcherState, load_ruleset
from supervisor.rules.replay import replay_text
from supervisor.settings import Settings
from supervisor.slurm.client import SlurmRejected
from supervisor.slurm.launchers import runner
from supervisor.slurm.parse import make_job_name
from supervisor.slurm.submit import base_log_dir
from supervisor.store import Store
from tests.act.test_alerts import FakeScheduler, Sink

NOW = 1_000_000.0
FAULT = "RuntimeError: CUDA error: uncorrectable ECC error encountered (hostname=node2)\n"


class Slurm:
    def __init__(self, state: str | Exception | None) -> None:
        self.state = state
        self.cancelled: list[str] = []

    async def cancel(self, job_id: str) -> None:
        self.cancelled.append(job_id)

    async def hold(self, job_id: str) -> None: ...

    async def release(self, job_id: str) -> None: ...

    async def job_nodes(self, job_id: str) -> str:
        return "node[1-2]"

    async def node_at(self, address: str, nodelist: str) -> str | None:
        return address

    async def node_state(self, node: str) -> str | None:
        if isinstance(self.state, Exception):
            raise self.state
        return self.state


@functools.cache
def the_fault() -> Match:
    """The real rules' decision on the fault line (loaded once: compiling the rules is most of a test)."""
    *_, m = [
        m
        for m in replay_text(load_ruleset(), FAULT, st=MatcherState(run_id="r1", attempt=1))
        if not m.followup
    ]
    assert m.rule == "cuda-hardware-error"
    return m


def fault_on_the_worker(tmp: Path, node_state: str | Exception | None) -> tuple[str, Slurm, Store]:
    """Job 77 of a run with one spare node, under the runner, its driver run 1 just exited after a GPU fault
    on node2 (the head is node1); returns what Shepherd did."""
    ckpt = tmp / "ckpt"
    (ckpt / "step_2").mkdir(parents=True)
    (ckpt / "step_2" / "training_info.json").write_text(json.dumps({"step": 2}))
    store = Store(tmp / "s.sqlite3", clock=lambda: NOW)
    body = {
        "name": "r1",
        "command": ["true"],
        "workdir": str(tmp),
        "checkpoint": {"dir": str(ckpt)},
        "resume": {"backoff_s": 0},
        "slurm": {"nodes": 1, "spare_nodes": 1},
    }
    store.create_run("r1", "r1", json.dumps(body), str(tmp / "r1.yaml"))
    store.begin_attempt("r1", lambda n: make_job_name("r1", n), {"runner": True, runner.BY_RUN: True})
    store.attempt_submitted("r1", 1, "77")
    store.observe_attempt("r1", 1, slurm_state="RUNNING", reason=None, nodes="node[1-2]", started=True)
    store.set_run_state("r1", RunState.RUNNING)
    settings = Settings(root=tmp / "root")
    settings.ensure_dirs()
    run = store.get_run("r1")
    assert run is not None
    d = runner.runner_dir(base_log_dir(run.spec, settings.runs_dir / "r1"), runner.runner_key(1, "r1"))
    d.mkdir(parents=True)
    (d / runner.exit_name(1)).write_text(f"run=1\ncode=1\nat={NOW}\nend\n")
    slurm = Slurm(node_state)
    actions = Actions(store, slurm, FakeScheduler(), Sink(), settings, clock=lambda: NOW)
    m = the_fault()
    attempt = store.get_attempt("r1", 1)
    assert attempt is not None
    anyio.run(actions.on_match, run, attempt, m)
    (decision,) = [x for x in store.decisions("r1") if x.rule == "cuda-hardware-error"]
    return decision.outcome or "", slurm, store


@pytest.mark.parametrize("state", ["MIXED", "MIXED+DRAIN", "IDLE+FAIL", None])
def test_a_fault_on_a_live_worker_node_is_taken_by_the_spare_in_place(
    tmp_path: Path, state: str | None
) -> None:
    outcome, slurm, _ = fault_on_the_worker(tmp_path, state)
    assert "in place" in outcome and "node2 drained" in outcome, outcome
    assert slurm.cancelled == []


@pytest.mark.parametrize("state", ["DOWN", "DOWN*+DRAIN", "MIXED+NOT_RESPONDING", "IDLE+POWERED_DOWN"])
def test_a_fault_on_a_node_slurm_says_is_down_resubmits_without_it(tmp_path: Path, state: str) -> None:
    outcome, slurm, _ = fault_on_the_worker(tmp_path, state)
    assert "in place" not in outcome and "--exclude=node2" in outcome, outcome
    assert slurm.cancelled == ["77"]


def test_when_slurm_cannot_say_the_rule_decides_as_before(tmp_path: Path) -> None:
    outcome, _, _ = fault_on_the_worker(tmp_path, SlurmRejected("scontrol: error: Node node2 not found"))
    assert "in place" in outcome, outcome
