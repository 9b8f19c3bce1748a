"""Commands over Socket Mode against the stand-in: ack first, authorised users only, buttons == commands."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from supervisor.notify.slack import blocks as bk
from supervisor.notify.slack.handler import audit_log
from supervisor.notify.slack.service import SlackService, slack_service
from supervisor.testing.slack_standin import SlackStandin
from tests.notify.conftest import ALICE, BOB, CAROL, CHANNEL, FakeControl, make_settings

pytestmark = pytest.mark.anyio


async def eventually(pred: Callable[[], Any], within: float = 5.0) -> None:
    async with asyncio.timeout(within):
        while not pred():  # noqa: ASYNC110 - polling what the stand-in recorded
            await asyncio.sleep(0.01)


@pytest.fixture
def control() -> FakeControl:
    return FakeControl()


@pytest.fixture
async def service(
    db: sqlite3.Connection, standin: SlackStandin, control: FakeControl
) -> AsyncIterator[SlackService]:
    svc = slack_service(db, make_settings(standin), control)
    task = asyncio.create_task(svc.run())
    await standin.wait_connected()
    svc.notifier.run_opened("gsm8k-a", "gsm8k-a", "", "1001")
    svc.notifier.event("gsm8k-a", "alert", "failed: CUDA OOM", level="error", buttons=True)
    await eventually(lambda: len(standin.rec.messages) == 2)
    try:
        yield svc
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


def thread_texts(standin: SlackStandin) -> list[str]:
    return [m["text"] for m in standin.thread(standin.top_level()[0]["ts"])]


async def test_authorised_resume_acts_replies_ephemerally_and_notes_it_in_the_thread(
    service: SlackService, standin: SlackStandin, control: FakeControl, db: sqlite3.Connection
) -> None:
    eid = await standin.send_slash("/resume", "gsm8k-a best", ALICE, CHANNEL)
    await standin.wait_ack(eid)
    await eventually(lambda: standin.rec.ephemerals)
    assert control.calls == [("resume", "gsm8k-a", "best", ALICE)]
    assert standin.rec.ephemerals[0]["user"] == ALICE
    assert "Resubmitted gsm8k-a from best" in standin.rec.ephemerals[0]["text"]
    await eventually(lambda: len(thread_texts(standin)) == 2)
    note = standin.thread(standin.top_level()[0]["ts"])[-1]
    assert note["text"].startswith("gsm8k-a: Resume from best requested")
    assert f"<@{ALICE}>" in json.dumps(note["blocks"])
    (entry,) = audit_log(db)
    assert (entry["user_id"], entry["action"], entry["run"], entry["outcome"]) == (
        ALICE,
        "resume",
        "gsm8k-a",
        "ok",
    )


async def test_a_stranger_is_refused_politely_and_nothing_happens(
    service: SlackService, standin: SlackStandin, control: FakeControl, db: sqlite3.Connection
) -> None:
    eid = await standin.send_slash("/resume", "gsm8k-a", BOB, CHANNEL)
    await standin.wait_ack(eid)
    await eventually(lambda: standin.rec.ephemerals)
    assert control.calls == []
    assert standin.rec.ephemerals[0]["user"] == BOB and "Sorry" in standin.rec.ephemerals[0]["text"]
    (entry,) = audit_log(db)
    assert (entry["user_id"], entry["authorised"], entry["outcome"]) == (BOB, 0, "refused")
    await asyncio.sleep(0.1)
    assert len(standin.rec.messages) == 2  # nothing posted in the thread


async def test_button_press_does_the_same_as_the_command_and_retires_the_buttons(
    service: SlackService, standin: SlackStandin, control: FakeControl
) -> None:
    alert = standin.rec.messages[1]
    eid = await standin.press_button(bk.ACTION_RESUME_LATEST, "gsm8k-a", ALICE, CHANNEL, message=alert)
    await standin.wait_ack(eid)
    await eventually(lambda: standin.rec.ephemerals and standin.rec.updates)
    assert control.calls == [("resume", "gsm8k-a", "latest", ALICE)]
    update = standin.rec.updates[0]
    assert update["ts"] == alert["ts"] and not any(b["type"] == "actions" for b in update["blocks"])
    assert f"<@{ALICE}>" in json.dumps(update["blocks"])


async def test_button_press_from_a_stranger_is_refused(
    service: SlackService, standin: SlackStandin, control: FakeControl
) -> None:
    eid = await standin.press_button(
        bk.ACTION_GIVE_UP, "gsm8k-a", BOB, CHANNEL, message=standin.rec.messages[1]
    )
    await standin.wait_ack(eid)
    await eventually(lambda: standin.rec.ephemerals)
    assert control.calls == [] and standin.rec.updates == []
    assert "Sorry" in standin.rec.ephemerals[0]["text"]


async def test_ack_comes_before_the_long_work_which_reports_afterwards(
    service: SlackService, standin: SlackStandin, control: FakeControl
) -> None:
    control.gate = asyncio.Event()
    eid = await standin.send_slash("/resume", "gsm8k-a", ALICE, CHANNEL)
    ack = await standin.wait_ack(eid)
    assert ack["envelope_id"] == eid
    assert control.calls == [] and standin.rec.ephemerals == []  # still working when Slack got its ack
    control.gate.set()
    await eventually(lambda: standin.rec.ephemerals)
    assert control.calls == [("resume", "gsm8k-a", "latest", ALICE)]


async def test_unknown_runs_bad_arguments_and_wrong_states_get_clear_answers(
    service: SlackService, standin: SlackStandin, control: FakeControl, db: sqlite3.Connection
) -> None:
    for text in ("nope-run", "gsm8k-a newest", "gsm8k-a", "gsm8k-a"):
        await standin.wait_ack(await standin.send_slash("/resume", text, ALICE, CHANNEL))
        n = len(standin.rec.ephemerals) + 1
        await eventually(lambda n=n: len(standin.rec.ephemerals) == n)  # type: ignore[misc]
    replies = [e["text"] for e in standin.rec.ephemerals]
    assert "no run called 'nope-run'" in replies[0]
    assert "checkpoint must be" in replies[1]
    assert "Resubmitted" in replies[2]
    assert "is running; nothing to resume" in replies[3]
    assert [e["outcome"] for e in reversed(audit_log(db))] == ["rejected", "bad_request", "ok", "rejected"]


async def test_status_is_open_to_the_wider_list_and_help_to_everyone(
    service: SlackService, standin: SlackStandin, control: FakeControl
) -> None:
    await standin.wait_ack(await standin.send_slash("/status", "", CAROL, CHANNEL))
    await eventually(lambda: len(standin.rec.ephemerals) == 1)
    await standin.wait_ack(await standin.send_slash("/help", "", BOB, CHANNEL))
    await eventually(lambda: len(standin.rec.ephemerals) == 2)
    assert "gsm8k-a: FAILED" in standin.rec.ephemerals[0]["text"]
    assert "/resume <run>" in standin.rec.ephemerals[1]["text"]
    assert control.calls == [("status", None)]


async def test_silence_from_slack_quiets_the_run(
    service: SlackService, standin: SlackStandin, control: FakeControl
) -> None:
    await standin.wait_ack(await standin.send_slash("/shepherd", "silence gsm8k-a 4h", ALICE, CHANNEL))
    await eventually(lambda: standin.rec.ephemerals)
    assert control.calls == [("silence", "gsm8k-a", 14400.0, ALICE)]
    assert service.notifier.silenced("gsm8k-a")
    assert service.notifier.event("gsm8k-a", "alert", "another OOM", level="error") is None


async def test_reconnects_after_slack_asks_it_to_and_keeps_serving(
    service: SlackService, standin: SlackStandin, control: FakeControl
) -> None:
    await standin.disconnect_sockets()
    await eventually(lambda: standin.rec.socket_connections >= 2)
    await standin.wait_connected()
    await standin.wait_ack(await standin.send_slash("/hold", "gsm8k-a", ALICE, CHANNEL))
    await eventually(lambda: control.calls)
    assert control.calls == [("hold", "gsm8k-a", ALICE)]


async def test_reply_falls_back_to_response_url_when_ephemeral_post_fails(
    service: SlackService, standin: SlackStandin, control: FakeControl
) -> None:
    standin.fail_next("chat.postEphemeral", "channel_not_found")  # e.g. a DM the bot is not part of
    await standin.wait_ack(await standin.send_slash("/status", "gsm8k-a", ALICE, "D0DIRECT"))
    await eventually(lambda: standin.rec.responses)
    assert standin.rec.responses[0]["response_type"] == "ephemeral"
    assert "gsm8k-a: FAILED" in standin.rec.responses[0]["text"]


async def test_socket_comes_back_after_slack_was_down(
    service: SlackService, standin: SlackStandin, control: FakeControl
) -> None:
    await standin.go_down()
    await asyncio.sleep(0.3)
    await standin.come_back()
    await standin.wait_connected(within=10)
    await standin.wait_ack(await standin.send_slash("/release", "gsm8k-a", ALICE, CHANNEL), within=5)
    await eventually(lambda: control.calls)
    assert control.calls == [("release", "gsm8k-a", ALICE)]


async def test_the_demo_can_drive_the_stand_in_over_http(
    service: SlackService, standin: SlackStandin, control: FakeControl
) -> None:
    import aiohttp

    body = {"command": "/cancel", "text": "gsm8k-a", "user_id": ALICE, "channel_id": CHANNEL}
    async with aiohttp.ClientSession() as s:
        async with s.post(f"{standin.url}/_standin/slash", json=body) as r:
            assert r.status == 200
        await eventually(lambda: control.calls)
        async with s.get(f"{standin.url}/_standin/recorded") as r:
            recorded = await r.json()
    assert control.calls == [("cancel", "gsm8k-a", ALICE)]
    assert recorded["acks"] and recorded["messages"][0]["text"].startswith("Run gsm8k-a")
