"""A planned hop of a chain (the trainer saved at its deadline, a preemption after a save) is one line in the
run's thread: no incident, no "Resolved", and the next link's submission and start are not announced again.
A failure's resume still opens an incident."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import anyio
import pytest

from supervisor.decide.transitions import resubmitted, transition
from supervisor.domain.jobstate import JobState
from supervisor.domain.notices import Notice
from supervisor.domain.observations import StateEvent
from supervisor.domain.overrides import AttemptOverrides
from supervisor.domain.runs import AttemptState, RunState
from supervisor.notify.slack.sink import SlackSink
from supervisor.rules.engine import MatcherState, RuleSet, feed, load_ruleset
from supervisor.rules.replay import replay_text
from supervisor.slurm.reconcile import AttemptUpdate, UpdateKind
from supervisor.testing.slack_standin import SlackStandin
from tests.act.test_alerts import NOW, World, decided
from tests.decide.test_transitions import attempt, obs, run
from tests.notify.slack.test_incidents import GROUPING
from tests.notify.slack.test_notifier import Clock, stack

DEADLINE_LINE = "INFO Timeout has been reached, stopping training early"


@pytest.fixture(scope="module")
def rs() -> RuleSet:
    return load_ruleset()


def save_deadline_hop(tmp: Path, rs: RuleSet) -> tuple[Notice, AttemptOverrides]:
    tmp.mkdir()
    w = World(tmp)
    w.checkpoint(10, 0.4)
    notice = w.act(decided(rs, DEADLINE_LINE))
    ((_, _, overrides),) = w.scheduler.scheduled
    return notice, overrides


def preemption_hop(tmp: Path, rs: RuleSet) -> tuple[Notice, AttemptOverrides]:
    tmp.mkdir()
    w = World(tmp)
    w.checkpoint(20, 0.5)
    (m,) = feed(
        rs, MatcherState(run_id="r1", attempt=1), StateEvent("r1", 1, "77", JobState.PREEMPTED, at=NOW)
    )
    notice = w.act(m)
    ((_, _, overrides),) = w.scheduler.scheduled
    return notice, overrides


def started(n: int, overrides: AttemptOverrides) -> Notice:
    """What the daemon says when attempt n is first seen running (decide/transitions.py)."""
    a = attempt(AttemptState.SUBMITTED, n=n, overrides_json=json.dumps(overrides.to_dict()))
    tr = transition(
        AttemptUpdate("r1", n, UpdateKind.OBSERVED, obs(JobState.RUNNING)), run(), a, now=NOW, grace_s=60
    )
    assert tr.notice is not None
    return tr.notice


def test_a_save_deadline_or_a_preemption_after_a_save_is_a_planned_hop(tmp_path: Path, rs: RuleSet) -> None:
    notice, overrides = save_deadline_hop(tmp_path / "a", rs)
    assert notice.kind == "hop" and notice.level == "info" and not notice.needs_human
    assert notice.title == "r1: the trainer stopped at its save deadline — resuming from step 10 as attempt 2"
    assert notice.text == "" and notice.excerpt is None and overrides.planned
    notice, overrides = preemption_hop(tmp_path / "b", rs)
    assert notice.kind == "hop" and overrides.planned
    assert notice.title == "r1: preempted — resuming from step 20 as attempt 2"


def test_a_failure_is_no_planned_hop(tmp_path: Path, rs: RuleSet) -> None:
    w = World(tmp_path)
    w.checkpoint(10, 0.4)
    notice = w.act(decided(rs, "[rank0]: torch.distributed.DistBackendError: NCCL error in: x.cpp:1970"))
    ((_, _, overrides),) = w.scheduler.scheduled
    assert notice.kind == "resumed" and not overrides.planned


def test_a_time_limit_with_nothing_saved_is_no_planned_hop(tmp_path: Path, rs: RuleSet) -> None:
    w = World(tmp_path)
    notice = w.act(decided(rs, DEADLINE_LINE))
    assert notice.kind == "resumed"


def test_the_next_links_submission_and_start_are_said_only_in_the_log() -> None:
    planned, failed = AttemptOverrides(planned=True), AttemptOverrides()
    assert resubmitted("r1", 2, "78", planned).level == "debug"
    assert resubmitted("r1", 2, "78", failed).level == "info"
    assert started(2, planned).level == "debug" and started(2, failed).level == "info"


@pytest.fixture
def two_hops(tmp_path: Path, rs: RuleSet) -> list[tuple[Notice, AttemptOverrides]]:
    """A chain's two hops as the real actions decide them: a save at the deadline, then a preemption."""
    return [save_deadline_hop(tmp_path / "a", rs), preemption_hop(tmp_path / "b", rs)]


@pytest.mark.anyio
async def test_a_two_hop_chain_is_two_lines_in_the_thread_and_no_incident(
    two_hops: list[tuple[Notice, AttemptOverrides]], db: sqlite3.Connection, standin: SlackStandin
) -> None:
    clock = Clock()
    notifier, sender, _ = stack(db, standin, clock=clock, **GROUPING)
    sink = SlackSink(notifier)
    sink.publish(Notice("r1", "opened", "r1 submitted", fields={"name": "r1", "job_id": "77"}))
    for n, (hop, overrides) in enumerate(two_hops, start=2):
        sink.publish(hop)
        sink.publish(resubmitted("r1", n, str(76 + n), overrides))
        clock.t += 30
        await sender.drain()
        sink.publish(started(n, overrides))
        clock.t += 600  # long past resolve_after_s: an incident would have resolved with a message by now
        await sender.drain()
    sink.publish(Notice("r1", "completed", "r1 completed"))
    clock.t += 600
    await sender.drain()
    (opener,) = standin.top_level()
    thread = [m["text"] for m in standin.thread(opener["ts"])]
    assert len(thread) == 3, thread
    assert "save deadline" in thread[0] and "preempted" in thread[1] and "completed" in thread[2]
    assert not any("Resolved" in t or "resolved" in t for t in thread)
    assert notifier.incidents("r1") == []


def test_what_a_preemption_inhibits_goes_to_the_log_not_into_an_incident(tmp_path: Path, rs: RuleSet) -> None:
    """The ranks of a preempted job die with NCCL errors: folded under the hop, they open no incident."""
    w = World(tmp_path)
    w.checkpoint(20, 0.5)
    st = MatcherState(run_id="r1", attempt=1)
    (hop,) = feed(rs, st, StateEvent("r1", 1, "77", JobState.PREEMPTED, at=NOW))
    w.act(hop)
    ((_, _, overrides),) = w.scheduler.scheduled
    w.store.set_run_state("r1", RunState.BACKOFF, next_attempt=overrides.to_dict())  # as the scheduler does
    (nccl,) = replay_text(rs, "[rank0]: torch.distributed.DistBackendError: NCCL error in: x.cpp:1970", st=st)
    assert nccl.followup_of == "slurm-preempted"
    run, attempt = w.store.get_run("r1"), w.store.get_attempt("r1", 1)
    assert run is not None and attempt is not None
    anyio.run(w.actions.on_match, run, attempt, nccl)
    related = w.sink.notices[-1]
    assert related.kind == "related" and related.level == "debug"
