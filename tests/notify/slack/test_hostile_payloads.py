"""Slack payloads are parsed within bounds: nesting, field counts and wrong shapes are refused or ignored,
never a crash (an unhandled error in HTTP mode is a 500; in Socket Mode a dead listener task)."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp import web

from supervisor.notify.slack.handler import MAX_BLOCKS, from_action, from_slash
from supervisor.notify.slack.http_mode import _invocation


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        (b"[" * 100_000 + b"]" * 100_000, "application/json"),
        (b'{"type": "url_verification", "challenge": ' + b"[" * 50 + b"]" * 50 + b"}", "application/json"),
        (b"&".join(b"f%d=1" % i for i in range(1000)), "application/x-www-form-urlencoded"),
        (b"payload=" + b"%5B" * 20_000 + b"%5D" * 20_000, "application/x-www-form-urlencoded"),
    ],
)
def test_a_verified_body_past_the_bounds_is_a_400(body: bytes, content_type: str) -> None:
    got = _invocation(body, content_type)
    assert isinstance(got, web.Response) and got.status == 400


@pytest.mark.parametrize(
    "payload",
    [
        {"type": "block_actions", "actions": 5},
        {"type": "block_actions", "actions": "resume"},
        {"type": "block_actions", "actions": [None]},
        {"type": "block_actions", "actions": {"0": {}}},
    ],
)
def test_a_button_payload_of_the_wrong_shape_is_ignored(payload: dict[str, Any]) -> None:
    assert from_action(payload) is None


def test_the_pressed_messages_blocks_are_kept_only_in_slacks_own_shape() -> None:
    base: dict[str, Any] = {
        "type": "block_actions",
        "user": {"id": "U1"},
        "actions": [{"action_id": "resume_latest", "value": "run-1"}],
    }
    ok = from_action({**base, "message": {"blocks": [{"type": "section"}]}})
    assert ok is not None and ok.message_blocks == ({"type": "section"},)
    for blocks in ({"type": "section"}, [{"type": "x"}] * (MAX_BLOCKS + 1), ["text"], "blocks"):
        inv = from_action({**base, "message": {"blocks": blocks}})
        assert inv is not None and inv.message_blocks == ()


def test_slash_fields_of_any_type_are_typed_strings() -> None:
    inv = from_slash({"command": ["/resume"], "text": {"x": 1}, "user_id": 7, "channel_id": None})
    assert (inv.user_id, inv.channel_id, inv.raw) == ("", None, "")
