"""HTTP mode: the signature over the raw body and the timestamp are checked before anything else."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlencode

import aiohttp
import pytest
from aiohttp import web
from slack_sdk.signature import SignatureVerifier

from supervisor.notify.slack.handler import audit_log
from supervisor.notify.slack.service import slack_service
from supervisor.testing.slack_standin import SlackStandin
from tests.notify.conftest import ALICE, BOB, CHANNEL, FakeControl, make_settings

pytestmark = pytest.mark.anyio
SECRET = "8f742231b10e8888abcd99yyyzzz85a5"


@pytest.fixture
def control() -> FakeControl:
    return FakeControl()


@pytest.fixture
async def endpoint(db: sqlite3.Connection, standin: SlackStandin, control: FakeControl) -> AsyncIterator[str]:
    svc = slack_service(db, make_settings(standin, mode="http", signing_secret=SECRET), control)
    assert svc.http_app is not None
    runner = web.AppRunner(svc.http_app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}/slack/events"
    finally:
        await runner.cleanup()


def slash_body(user: str, text: str = "gsm8k-a", command: str = "/cancel") -> bytes:
    return urlencode(
        {"command": command, "text": text, "user_id": user, "channel_id": CHANNEL, "response_url": ""}
    ).encode()


def signed(body: bytes, ts: int | None = None, secret: str = SECRET) -> dict[str, str]:
    ts = int(time.time()) if ts is None else ts
    sig = SignatureVerifier(secret).generate_signature(timestamp=str(ts), body=body)
    assert sig is not None
    return {
        "X-Slack-Request-Timestamp": str(ts),
        "X-Slack-Signature": sig,
        "Content-Type": "application/x-www-form-urlencoded",
    }


async def post(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, str]:
    async with aiohttp.ClientSession() as s, s.post(url, data=body, headers=headers) as r:
        return r.status, await r.text()


async def settle(pred: Any) -> None:
    async with asyncio.timeout(5):
        while not pred():  # noqa: ASYNC110 - polling what the stand-in recorded
            await asyncio.sleep(0.01)


async def test_a_correctly_signed_command_is_acked_and_handled(
    endpoint: str, control: FakeControl, standin: SlackStandin
) -> None:
    body = slash_body(ALICE)
    status, _ = await post(endpoint, body, signed(body))
    assert status == 200
    await settle(lambda: standin.rec.ephemerals)
    assert control.calls == [("cancel", "gsm8k-a", ALICE)]


@pytest.mark.parametrize(
    "tamper",
    [
        "bad_signature",
        "other_secret",
        "old_timestamp",
        "future_timestamp",
        "body_changed",
        "no_headers",
        "ts_not_a_number",
    ],
)
async def test_bad_signatures_are_rejected_before_anything_happens(
    endpoint: str, control: FakeControl, db: sqlite3.Connection, tamper: str
) -> None:
    body = slash_body(ALICE)
    headers = signed(body)
    if tamper == "bad_signature":
        headers["X-Slack-Signature"] = "v0=" + "0" * 64
    elif tamper == "other_secret":
        headers = signed(body, secret="not-the-secret")
    elif tamper == "old_timestamp":
        headers = signed(body, ts=int(time.time()) - 301)
    elif tamper == "future_timestamp":
        headers = signed(body, ts=int(time.time()) + 301)
    elif tamper == "body_changed":
        body = slash_body(ALICE, text="gsm8k-b")
    elif tamper == "no_headers":
        headers = {"Content-Type": "application/x-www-form-urlencoded"}
    elif tamper == "ts_not_a_number":
        headers["X-Slack-Request-Timestamp"] = "12e3"
    status, _ = await post(endpoint, body, headers)
    assert status == 401
    await asyncio.sleep(0.05)
    assert control.calls == [] and audit_log(db) == []


async def test_http_mode_authorises_like_socket_mode(
    endpoint: str, control: FakeControl, standin: SlackStandin, db: sqlite3.Connection
) -> None:
    body = slash_body(BOB)
    status, _ = await post(endpoint, body, signed(body))
    assert status == 200
    await settle(lambda: standin.rec.ephemerals)
    assert control.calls == [] and audit_log(db)[0]["outcome"] == "refused"


async def test_button_payload_over_http(endpoint: str, control: FakeControl, standin: SlackStandin) -> None:
    payload = {
        "type": "block_actions",
        "user": {"id": ALICE},
        "channel": {"id": CHANNEL},
        "actions": [{"action_id": "shepherd_give_up", "value": "gsm8k-a"}],
    }
    body = urlencode({"payload": json.dumps(payload)}).encode()
    status, _ = await post(endpoint, body, signed(body))
    assert status == 200
    await settle(lambda: control.calls)
    assert control.calls == [("give_up", "gsm8k-a", ALICE)]


async def test_url_verification_challenge(endpoint: str) -> None:
    body = json.dumps({"type": "url_verification", "challenge": "abc123"}).encode()
    headers = {**signed(body), "Content-Type": "application/json"}
    status, text = await post(endpoint, body, headers)
    assert status == 200 and json.loads(text) == {"challenge": "abc123"}
