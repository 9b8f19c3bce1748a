"""The outbox against the loopback Slack with the real slack-sdk: threads, order, outages, 429, bounds."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from slack_sdk.web.async_client import AsyncWebClient

from supervisor.notify.slack.notifier import Notifier, OutboxSender, instance_id
from supervisor.notify.slack.transport import WebApiTransport, WebhookTransport
from supervisor.settings import SlackSettings
from supervisor.store import Store
from supervisor.testing.slack_standin import SlackStandin
from tests.notify.conftest import BOT, CHANNEL, make_settings

pytestmark = pytest.mark.anyio


class Clock:
    def __init__(self, t: float = 1_800_000_000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def stack(
    db: sqlite3.Connection, standin: SlackStandin, clock: Any = None, **over: Any
) -> tuple[Notifier, OutboxSender, SlackSettings]:
    settings = make_settings(standin, **over)
    kw = {"clock": clock} if clock else {}
    notifier = Notifier(db, settings, **kw)
    if settings.mode == "webhook":
        from slack_sdk.webhook.async_client import AsyncWebhookClient

        transport: Any = WebhookTransport(
            AsyncWebhookClient(standin.webhook_url, timeout=3, retry_handlers=[])
        )
    else:
        client = AsyncWebClient(token=BOT, base_url=standin.api_url, timeout=3, retry_handlers=[])
        transport = WebApiTransport(client)
    sender = OutboxSender(db, transport, settings, notifier=notifier, **kw)
    return notifier, sender, settings


def texts(messages: list[dict[str, Any]]) -> list[str]:
    return [m["text"] for m in messages]


async def test_first_message_opens_the_thread_and_later_events_go_into_it(
    db: sqlite3.Connection, standin: SlackStandin
) -> None:
    notifier, sender, _ = stack(db, standin)
    notifier.run_opened(
        "a-1", "gsm8k-a", "8 nodes · Qwen2.5-1.5B", "1001", ["/logs/1001-logs/ray-driver.log"]
    )
    notifier.run_opened("b-1", "gsm8k-b", "2 nodes", "1002")
    notifier.event("a-1", "started", "Running on node[01-08]")
    notifier.event("b-1", "started", "Running on node[09-10]")
    notifier.event("a-1", "completed", "Completed at step 500")
    await sender.drain()

    top = standin.top_level(CHANNEL)
    assert [m["text"].split(" (")[0] for m in top] == ["Run gsm8k-a", "Run gsm8k-b"]
    a_ts, b_ts = top[0]["ts"], top[1]["ts"]
    assert texts(standin.thread(a_ts)) == [
        "gsm8k-a: Running on node[01-08]",
        "gsm8k-a: Completed at step 500",
    ]
    assert texts(standin.thread(b_ts)) == ["gsm8k-b: Running on node[09-10]"]
    assert "1001" in json.dumps(top[0]["blocks"]) and "ray-driver.log" in json.dumps(top[0]["blocks"])
    assert notifier.thread("a-1") is not None and notifier.thread("a-1").ts == a_ts  # type: ignore[union-attr]


async def test_events_arrive_in_the_order_they_were_queued(
    db: sqlite3.Connection, standin: SlackStandin
) -> None:
    notifier, sender, _ = stack(db, standin, max_messages_per_run=100)
    notifier.run_opened("a-1", "a", "", None)
    for i in range(12):
        notifier.event("a-1", "progress", f"step {i}")
    await sender.drain()
    assert texts(standin.thread(standin.top_level()[0]["ts"])) == [f"a: step {i}" for i in range(12)]


async def test_outage_and_daemon_restart_lose_nothing_and_send_nothing_twice(
    db_path: Path, standin: SlackStandin
) -> None:
    db = Store(db_path).db
    notifier, sender, _ = stack(db, standin, max_messages_per_run=100)
    notifier.run_opened("a-1", "a", "", "1001")
    notifier.event("a-1", "started", "running")
    await sender.drain()
    await standin.go_down()

    # Slack is unreachable: the failure and the resume happen meanwhile; the sender keeps retrying.
    notifier.event("a-1", "alert", "failed: NCCL timeout", level="error", buttons=True, needs_human=True)
    notifier.event("a-1", "resumed", "resumed from step_300 (rule nccl_timeout)")
    task = asyncio.create_task(sender.run())
    await asyncio.sleep(0.4)
    assert notifier.pending() == 3  # alert, channel line, resume: all waiting
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    db.close()

    # The daemon restarts with a new connection; more happens while Slack is still down.
    db = Store(db_path).db
    notifier, sender, _ = stack(db, standin, max_messages_per_run=100)
    notifier.event("a-1", "progress", "step 320")
    task = asyncio.create_task(sender.run())
    await asyncio.sleep(0.2)
    await standin.come_back()
    try:
        await sender.drain(within=10)
    finally:
        task.cancel()
    thread = standin.thread(standin.top_level()[0]["ts"])
    assert texts(thread) == [
        "a: running",
        "a: failed: NCCL timeout",
        "a: resumed from step_300 (rule nccl_timeout)",
        "a: step 320",
    ]
    assert [m["text"] for m in standin.top_level()][1].startswith(":rotating_light: a: failed: NCCL timeout")
    assert len(standin.rec.messages) == 6  # opener + 4 replies + 1 channel line, each exactly once
    db.close()


async def test_429_waits_for_retry_after_before_trying_again(
    db: sqlite3.Connection, standin: SlackStandin
) -> None:
    clock = Clock()
    notifier, sender, _ = stack(db, standin, clock=clock)
    notifier.run_opened("a-1", "a", "", None)
    standin.rate_limit(1, retry_after=7, methods=["chat.postMessage"])

    assert await sender.deliver_ready() == 0
    assert standin.rec.rate_limited == ["chat.postMessage"]
    calls = len(standin.rec.calls)
    clock.t += 6.9
    assert await sender.deliver_ready() == 0
    assert len(standin.rec.calls) == calls  # did not knock again before Retry-After passed
    clock.t += 0.2
    assert await sender.deliver_ready() == 1
    assert len(standin.rec.messages) == 1


async def test_crash_loop_of_20_failures_in_a_minute_posts_a_bounded_number(
    db: sqlite3.Connection, standin: SlackStandin
) -> None:
    clock = Clock()
    notifier, sender, settings = stack(db, standin, clock=clock)
    notifier.run_opened("a-1", "a", "", None)
    for i in range(20):  # each failure is resumed: a decision, shown on its own (alerts are grouped)
        notifier.event(
            "a-1",
            "resumed",
            f"attempt {i} failed",
            f"exit code 1 after {i}s",
            level="error",
            needs_human=True,
        )
        clock.t += 2.9
    clock.t += settings.rate_window_s  # the window ends: its digest goes out
    await sender.drain()

    opener = standin.top_level()[0]
    thread = standin.thread(opener["ts"])
    alerts = [m for m in thread if "failed" in m["text"] and "flood bound" not in m["text"]]
    digests = [m for m in thread if "flood bound" in m["text"]]
    assert len(alerts) == settings.max_messages_per_run == 5
    assert len(digests) == 1 and "15 more event(s)" in digests[0]["text"]
    assert len(standin.top_level()) == 2  # the opener + one "needs a human" line
    assert len(standin.rec.messages) == 1 + 5 + 1 + 1


async def test_the_same_event_twice_is_posted_once(db: sqlite3.Connection, standin: SlackStandin) -> None:
    notifier, sender, _ = stack(db, standin)
    notifier.run_opened("a-1", "a", "", None)
    assert notifier.event("a-1", "alert", "disk quota exceeded", "/scratch") is not None
    assert notifier.event("a-1", "alert", "disk quota exceeded", "/scratch") is None
    await sender.drain()
    assert len(standin.rec.messages) == 2


async def test_silenced_runs_and_rules_and_low_levels_stay_quiet(
    db: sqlite3.Connection, standin: SlackStandin
) -> None:
    notifier, sender, _ = stack(db, standin, level="warning")
    notifier.run_opened("a-1", "gsm8k-a", "", None)
    assert notifier.event("a-1", "progress", "step 10", level="info") is None  # below the level
    notifier.silences.add("rule:nccl_timeout", 3600, "U0ALICE")
    assert notifier.event("a-1", "alert", "nccl", level="error", rule="nccl_timeout") is None
    notifier.silences.add("gsm8k-a", 3600, "U0ALICE")  # by name
    assert notifier.event("a-1", "alert", "oom", level="error") is None
    assert notifier.event("a-1", "gave_up", "gave up after 3 attempts", level="error") is not None
    await sender.drain()
    assert [m["text"] for m in standin.rec.messages][1:] == ["gsm8k-a: gave up after 3 attempts"]


async def test_secrets_never_reach_slack(db: sqlite3.Connection, standin: SlackStandin) -> None:
    notifier, sender, _ = stack(db, standin)
    notifier.run_opened("a-1", "a", "env HF_TOKEN=hf_abcdefghijklmnopqrstuvwx", None)
    notifier.event(
        "a-1",
        "alert",
        "auth failed",
        "token xoxb-123456789012-abcdefghijkl rejected",
        excerpt="WANDB_API_KEY=0123456789abcdef\nghp_abcdefghijklmnopqrstuvwxyz0123",
    )
    await sender.drain()
    wire = json.dumps(standin.rec.messages)
    for leaked in ("hf_abcdefghijklmnop", "xoxb-123456789012", "0123456789abcdef", "ghp_abcdefghijkl"):
        assert leaked not in wire
    assert "xoxb-***" in wire


async def test_a_message_slack_took_before_the_crash_is_not_sent_again(
    db: sqlite3.Connection, standin: SlackStandin
) -> None:
    notifier, sender, _ = stack(db, standin)
    oid = notifier.run_opened("a-1", "a", "", None)
    assert oid is not None
    # Simulate the crash window: Slack accepted the post, the daemon died before recording it.
    row = db.execute("SELECT payload FROM slack_outbox WHERE id = ?", (oid,)).fetchone()
    await sender.transport.post(CHANNEL, json.loads(row[0]), None, f"{instance_id(db)}:{oid}")
    db.execute("UPDATE slack_outbox SET in_flight = 1 WHERE id = ?", (oid,))
    notifier.event("a-1", "started", "running")

    await sender.drain()
    assert len(standin.top_level()) == 1  # found by its metadata, not reposted
    assert texts(standin.thread(standin.top_level()[0]["ts"])) == ["a: running"]


async def test_an_in_flight_message_that_never_arrived_is_sent(
    db: sqlite3.Connection, standin: SlackStandin
) -> None:
    notifier, sender, _ = stack(db, standin)
    oid = notifier.run_opened("a-1", "a", "", None)
    db.execute("UPDATE slack_outbox SET in_flight = 1 WHERE id = ?", (oid,))
    await sender.drain()
    assert len(standin.rec.messages) == 1


async def test_rejected_layout_falls_back_to_text_and_does_not_block_the_channel(
    db: sqlite3.Connection, standin: SlackStandin
) -> None:
    notifier, sender, _ = stack(db, standin)
    notifier.run_opened("a-1", "a", "", None)
    standin.fail_next("chat.postMessage", "invalid_blocks")
    notifier.event("a-1", "started", "running")
    await sender.drain()
    assert len(standin.rec.messages) == 2
    assert standin.rec.messages[0]["blocks"] is None and standin.rec.messages[0]["text"].startswith("Run a")


async def test_a_revoked_token_keeps_messages_until_it_is_fixed(
    db: sqlite3.Connection, standin: SlackStandin
) -> None:
    notifier, sender, _ = stack(db, standin, retry_max_s=0.1)
    notifier.run_opened("a-1", "a", "", None)
    standin.fail_next("chat.postMessage", "invalid_auth", n=3)
    await sender.drain()
    assert db.execute("SELECT COUNT(*) FROM slack_outbox WHERE dead = 1").fetchone()[0] == 0
    assert len(standin.rec.messages) == 1


async def test_plot_goes_into_the_thread_via_files_upload_v2(
    db: sqlite3.Connection, standin: SlackStandin, tmp_path: Path
) -> None:
    notifier, sender, _ = stack(db, standin)
    png = tmp_path / "curves.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 40)
    notifier.run_opened("a-1", "a", "", None)
    notifier.upload_plot("a-1", png, "reward and validation, step 500")
    png.unlink()  # the outbox kept the bytes
    await sender.drain()
    ((fid, upload),) = standin.rec.uploads.items()
    assert upload["data"] == b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 40
    done = standin.rec.completed_uploads[0]
    assert done["channel_id"] == CHANNEL and done["thread_ts"] == standin.top_level()[0]["ts"]
    assert done["files"] == [{"id": fid, "title": "reward and validation, step 500"}]


async def test_webhook_mode_posts_in_order_and_honours_429(
    db: sqlite3.Connection, standin: SlackStandin
) -> None:
    clock = Clock()
    notifier, sender, _ = stack(db, standin, clock=clock, mode="webhook")
    notifier.run_opened("a-1", "a", "", None)
    notifier.event("a-1", "alert", "failed", level="error")
    standin.rate_limit(1, retry_after=5, methods=["webhook"])
    assert await sender.deliver_ready() == 0
    clock.t += 5.1
    await sender.drain()
    assert [w["text"] for w in standin.rec.webhooks] == ["Run a (a-1) submitted", "a: failed"]
