"""Incidents: a run's trouble is one message plus bounded updates, inhibited children fold into their
parent, people get reminded while a human is needed, and every incident closes with a resolution."""

from __future__ import annotations

import json
import math
import sqlite3
from dataclasses import dataclass
from typing import Any

import pytest

from supervisor.notify.slack import incidents as inc_
from supervisor.notify.slack.notifier import Notifier, OutboxSender
from supervisor.store import Store
from supervisor.testing.slack_standin import SlackStandin
from tests.notify.slack.test_notifier import Clock, stack

pytestmark = pytest.mark.anyio

GROUPING = {
    "group_wait_s": 10.0,
    "group_interval_s": 30.0,
    "repeat_interval_s": 3600.0,
    "resolve_after_s": 60.0,
}


@dataclass
class Opened:
    """A run `a-1` (gsm8k-a) with its thread opened, under GROUPING timings and a hand-driven clock."""

    clock: Clock
    notifier: Notifier
    sender: OutboxSender


@pytest.fixture
def opened(db: sqlite3.Connection, standin: SlackStandin) -> Opened:
    clock = Clock()
    notifier, sender, _ = stack(db, standin, clock=clock, **GROUPING)
    notifier.run_opened("a-1", "gsm8k-a", "", "1001")
    return Opened(clock, notifier, sender)


def in_thread(standin: SlackStandin) -> list[dict[str, Any]]:
    opener = standin.top_level()[0]
    return standin.thread(opener["ts"])


def related_count(text: str) -> int:
    """How many events a message accounts for (its headline counts as one when it is the incident's)."""
    blob = json.dumps(text)
    if "more related event(s)" in blob:
        return int(blob.split(" more related event(s)")[0].rsplit(":", 1)[-1].strip().split()[-1])
    return 0


async def test_a_burst_of_50_related_events_in_a_minute_is_one_incident_message_plus_bounded_updates(
    db: sqlite3.Connection, standin: SlackStandin
) -> None:
    clock = Clock()
    notifier, sender, settings = stack(db, standin, clock=clock, **GROUPING)
    notifier.run_opened("a-1", "gsm8k-a", "", "1001")
    await sender.drain()
    start = clock.t
    # A dead node: NCCL watchdog timeouts from every rank, actors dying, a few repeated lines.
    for i in range(50):
        rule = ("nccl-error", "ray-actor-died")[i % 2]
        notifier.event(
            "a-1",
            "alert",
            f"{rule}: rank {i} watchdog timeout",
            level="error",
            rule=rule,
            needs_human=True,
        )
        clock.t += 1.2  # 50 events in 60 s
        await sender.drain()  # the sender's loop: flush what is due, deliver
    for _ in range(60):  # and a minute more, so every update that is due has gone out
        clock.t += 1.0
        await sender.drain()

    thread = in_thread(standin)
    incident = [m for m in thread if "Grouped with" in json.dumps(m.get("blocks"))]
    updates = [m for m in thread if "incident update" in json.dumps(m.get("blocks"))]
    assert len(thread) == 1 + len(updates), [m["text"] for m in thread]  # nothing but the incident
    assert len(incident) == 1 and thread[0] is incident[0]
    assert "rank 0 watchdog timeout" in incident[0]["text"]  # the first event is the headline
    # Updates: at most one per group interval over the burst, plus the last one.
    burst = clock.t - start
    assert 1 <= len(updates) <= math.ceil(burst / settings.group_interval_s)
    grouped = int(incident[0]["text"].rsplit("(+", 1)[1].split(" related")[0])
    assert 1 + grouped + sum(related_count(u["text"]) for u in updates) == 50  # every event accounted for
    # The channel: the run's opener and one "needs a human" line, not fifty.
    assert len(standin.top_level()) == 2


async def test_a_child_alert_is_inhibited_by_its_parent_and_shown_only_inside_its_incident(
    opened: Opened, standin: SlackStandin
) -> None:
    clock, notifier, sender = opened.clock, opened.notifier, opened.sender
    notifier.event("a-1", "resumed", "node-failure: node2 is down", level="warning", rule="node-failure")
    for rank in range(8):
        notifier.event(
            "a-1",
            "related",
            f"nccl-error: rank {rank} watchdog timeout",
            level="warning",
            rule="nccl-error",
            parent="node-failure",
        )
    clock.t += GROUPING["group_interval_s"]
    await sender.drain()

    thread = in_thread(standin)
    assert thread[0]["text"].split(":")[1].strip() == "node-failure"
    assert not any("rank 3" in m["text"] for m in thread)  # no child posted on its own
    update = json.dumps(thread[-1]["blocks"], ensure_ascii=False)
    assert "nccl-error ×8 (suppressed: caused by node-failure)" in update


async def test_alerts_wait_for_the_group_but_a_decision_goes_out_at_once_with_them_under_it(
    opened: Opened, standin: SlackStandin
) -> None:
    notifier, sender = opened.notifier, opened.sender
    assert (
        notifier.event("a-1", "alert", "nccl-error: rank 1 timeout", level="error", rule="nccl-error") is None
    )
    await sender.drain()
    assert len(in_thread(standin)) == 0  # still in the group wait
    notifier.event(
        "a-1", "resumed", "node-failure: resuming from step_40", level="warning", rule="node-failure"
    )
    await sender.drain()
    thread = in_thread(standin)
    assert len(thread) == 1
    assert "node-failure" in thread[0]["text"] and "(+1 related)" in thread[0]["text"]


async def test_anything_else_about_the_run_ends_the_group_wait_so_the_thread_stays_in_order(
    opened: Opened, standin: SlackStandin
) -> None:
    notifier, sender = opened.notifier, opened.sender
    notifier.event("a-1", "alert", "qos-pending: QOSMaxGRESPerUser for 30m", level="warning")
    notifier.event("a-1", "submitted", "attempt 2 submitted as Slurm job 1002")
    await sender.drain()
    assert [m["text"].split(": ", 1)[1] for m in in_thread(standin)] == [
        "qos-pending: QOSMaxGRESPerUser for 30m",
        "attempt 2 submitted as Slurm job 1002",
    ]


async def test_a_resumed_attempt_that_stays_up_resolves_the_incident_with_a_message(
    opened: Opened, standin: SlackStandin
) -> None:
    clock, notifier, sender = opened.clock, opened.notifier, opened.sender
    notifier.event("a-1", "resumed", "cuda-oom: resuming from step_40", level="warning", rule="cuda-oom")
    notifier.event("a-1", "started", "attempt 2 running on node1")
    clock.t += GROUPING["resolve_after_s"] - 1
    await sender.drain()
    assert notifier.incidents("a-1")  # not yet: it may crash again
    clock.t += 2
    await sender.drain()
    assert notifier.incidents("a-1") == []
    last = in_thread(standin)[-1]["text"]
    assert "Resolved: cuda-oom: resuming from step_40" in last and "running again" in last


async def test_a_new_failure_while_recovering_keeps_the_same_incident(
    opened: Opened, standin: SlackStandin
) -> None:
    clock, notifier, sender = opened.clock, opened.notifier, opened.sender
    notifier.event("a-1", "resumed", "cuda-oom: resuming from step_40", level="warning", rule="cuda-oom")
    notifier.event("a-1", "started", "attempt 2 running")
    clock.t += 20
    notifier.event(
        "a-1", "resumed", "cuda-oom: resuming from step_40 again", level="warning", rule="cuda-oom"
    )
    clock.t += GROUPING["resolve_after_s"] + 1
    await sender.drain()
    assert len(notifier.incidents("a-1")) == 1
    assert notifier.incidents("a-1")[0]["events"] == 2
    assert not any("Resolved" in m["text"] for m in in_thread(standin))


async def test_completion_and_an_ended_run_resolve_at_once(
    db: sqlite3.Connection, standin: SlackStandin
) -> None:
    clock = Clock()
    states = {"b-1": "RUNNING"}
    notifier, sender, _ = stack(db, standin, clock=clock, **GROUPING)
    notifier.run_state = states.get
    notifier.run_opened("a-1", "a", "", "1001")
    notifier.run_opened("b-1", "b", "", "1002")
    notifier.event("a-1", "alert", "rollouts-stalled for 20m", level="warning")
    notifier.event("a-1", "completed", "a-1 completed")
    notifier.event("b-1", "gave_up", "cuda-oom twice", level="error", needs_human=True)
    await sender.drain()
    assert notifier.incidents("a-1") == [] and len(notifier.incidents("b-1")) == 1
    a_thread = standin.thread(standin.top_level()[0]["ts"])
    assert "the run completed" in a_thread[-1]["text"]
    assert sum("a-1 completed" in m["text"] for m in a_thread) == 1  # the completion is said once
    states["b-1"] = "CANCELLED"  # cancelled on the command line: no one will be reminded of it
    await sender.drain()
    assert notifier.incidents() == []
    b_thread = standin.thread(standin.top_level()[1]["ts"])
    assert "the run is cancelled" in b_thread[-1]["text"]


async def test_an_incident_that_needs_a_human_is_repeated_until_someone_acts(
    db: sqlite3.Connection, standin: SlackStandin
) -> None:
    clock = Clock()
    notifier, sender, _ = stack(db, standin, clock=clock, **GROUPING)
    notifier.run_opened("a-1", "a", "", "1001")
    notifier.run_opened("b-1", "b", "", "1002")
    notifier.event("a-1", "gave_up", "cuda-oom twice", level="error", needs_human=True)
    notifier.event("b-1", "alert", "val dropped", level="warning")  # informational: no reminders
    for _ in range(3):
        clock.t += GROUPING["repeat_interval_s"] + 1
        await sender.drain()
    a_thread = standin.thread(standin.top_level()[0]["ts"])
    b_thread = standin.thread(standin.top_level()[1]["ts"])
    assert sum("Still needs a human" in m["text"] for m in a_thread) == 3
    assert not any("Still needs a human" in m["text"] for m in b_thread)


async def test_an_open_incident_survives_a_daemon_restart(db_path: Any, standin: SlackStandin) -> None:
    clock = Clock()
    db = Store(db_path).db
    notifier, _, _ = stack(db, standin, clock=clock, **GROUPING)
    notifier.run_opened("a-1", "a", "", "1001")
    notifier.event("a-1", "alert", "nccl-error: rank 0", level="error", rule="nccl-error")
    notifier.event("a-1", "alert", "nccl-error: rank 1", level="error", rule="nccl-error")
    db.close()

    db = Store(db_path).db
    notifier, sender, _ = stack(db, standin, clock=clock, **GROUPING)
    clock.t += GROUPING["group_wait_s"]
    await sender.drain()
    thread = in_thread(standin)
    assert len(thread) == 1 and "(+1 related)" in thread[0]["text"]
    assert isinstance(notifier, Notifier)


def test_next_step_is_pure_and_follows_the_timings() -> None:
    t = inc_.Timing(group_wait_s=10, group_interval_s=30, repeat_interval_s=100, resolve_after_s=20)
    inc = inc_.Incident(1, "a-1", opened_at=0.0, flush_at=10.0, headline={"title": "x", "needs_human": True})
    assert inc_.next_step(inc, 9.0, t) is None
    assert inc_.next_step(inc, 10.0, t) == "open"
    assert inc_.next_step(inc, 1.0, t, run_state="COMPLETED") == "open"  # say it before closing it
    inc.message_id, inc.last_update_at, inc.last_notice_at = 7, 10.0, 10.0
    inc.pending = [inc_.entry("alert", "y", rule="r", level="error")]
    assert inc_.next_step(inc, 39.0, t) is None
    assert inc_.next_step(inc, 40.0, t) == "update"
    inc.pending = []
    assert inc_.next_step(inc, 110.0, t) == "repeat"
    inc.recovering_since = 100.0
    assert inc_.next_step(inc, 119.0, t) is None  # recovering: no reminder, not resolved yet
    assert inc_.next_step(inc, 120.0, t) == "resolve"
    assert inc_.next_step(inc, 11.0, t, run_state="CANCELLED") == "resolve"


def test_summaries_count_and_name_the_parent() -> None:
    entries = [
        inc_.entry("related", f"rank {i}", rule="nccl-error", level="warning", parent="node-failure")
        for i in range(5)
    ]
    entries.append(inc_.entry("alert", "oom", rule="cuda-oom", level="error"))
    assert inc_.summarize(entries) == ["nccl-error ×5 (suppressed: caused by node-failure)", "cuda-oom"]


def test_shepherd_status_shows_the_open_incident(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    from supervisor.cli.main import main
    from supervisor.settings import SlackSettings
    from supervisor.store import Store

    root = tmp_path / "root"
    store = Store(root / "state" / "shepherd.sqlite3")
    store.create_run("toy-20261121-000000-abcd", "toy", '{"name": "toy", "command": ["echo"]}', "/x")
    notifier = Notifier(store.db, SlackSettings(mode="socket", channel="C0RUNS"))
    notifier.event("toy-20261121-000000-abcd", "gave_up", "cuda-oom twice", level="error", needs_human=True)
    notifier.event("toy-20261121-000000-abcd", "related", "nccl-error: rank 3", rule="nccl-error")
    store.close()
    assert main(["--root", str(root), "status", "toy"]) == 0
    assert "incident  open since" in capsys.readouterr().out
    assert main(["--root", str(root), "status", "--json", "toy"]) == 0
    incident = json.loads(capsys.readouterr().out)["incident"]
    assert incident["title"] == "cuda-oom twice" and incident["events"] == 2
