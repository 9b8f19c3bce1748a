"""How an outbox row reaches Slack: Web API (threads, uploads) or an incoming webhook (text only).

Transports turn every failure into one of three outcomes the sender understands:
`Retry` (Slack unreachable, 5xx, 429 with its Retry-After), `Blocked` (a
configuration problem such as a revoked token: keep the messages, retry slowly) and
`Permanent` (this message can never be accepted: bad blocks, too long).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Protocol

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.webhook.async_client import AsyncWebhookClient

METADATA_EVENT = "shepherd_outbox"

_BLOCKED_ERRORS = frozenset(
    {
        "invalid_auth",
        "not_authed",
        "account_inactive",
        "token_revoked",
        "token_expired",
        "missing_scope",
        "not_in_channel",
        "channel_not_found",
        "is_archived",
        "team_access_not_granted",
        "no_permission",
        "ekm_access_denied",
    }
)


class DeliveryError(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Retry(DeliveryError):
    """Try again later; `after` is Slack's Retry-After when it gave one.

    `uncertain`: the request may have reached Slack (timeout, dropped connection), so the
    row stays marked in flight and is looked up before it is sent again.
    """

    def __init__(self, reason: str, after: float | None = None, uncertain: bool = False) -> None:
        super().__init__(reason)
        self.after = after
        self.uncertain = uncertain


class Blocked(DeliveryError):
    """Slack refuses for a reason a human must fix (token, scopes, channel); keep the message."""


class Permanent(DeliveryError):
    """Slack will never accept this message as it is."""


@dataclass(frozen=True, slots=True)
class PostResult:
    ts: str | None


class Transport(Protocol):
    threads: bool

    async def post(
        self, channel: str, payload: dict[str, Any], thread_ts: str | None, key: str
    ) -> PostResult: ...

    async def upload(
        self, channel: str, thread_ts: str | None, data: bytes, filename: str, title: str, comment: str
    ) -> PostResult: ...

    async def find_sent(self, channel: str, thread_ts: str | None, key: str, oldest: float) -> str | None: ...

    async def update(self, channel: str, ts: str, payload: dict[str, Any]) -> PostResult: ...


def _header(headers: Any, name: str) -> str | None:
    if not headers:
        return None
    for k, v in dict(headers).items():
        if str(k).lower() == name.lower():
            return str(v[0] if isinstance(v, list) and v else v)
    return None


def retry_after(headers: Any) -> float | None:
    raw = _header(headers, "Retry-After")
    try:
        return max(0.0, float(raw)) if raw is not None else None
    except ValueError:
        return None


def classify(exc: BaseException) -> DeliveryError:
    """Map what slack-sdk/aiohttp raised to what the sender should do about it."""
    if isinstance(exc, DeliveryError):
        return exc
    if isinstance(exc, SlackApiError):
        status = int(getattr(exc.response, "status_code", 0) or 0)
        error = str(exc.response.get("error", "") if exc.response is not None else "")
        if status == 429 or error == "ratelimited":
            return Retry("ratelimited", after=retry_after(exc.response.headers) or 1.0)
        if status >= 500 or error in (
            "internal_error",
            "fatal_error",
            "service_unavailable",
            "request_timeout",
        ):
            return Retry(f"slack {status} {error}", uncertain=True)
        if error in _BLOCKED_ERRORS:
            return Blocked(error)
        return Permanent(error or f"http {status}")
    if isinstance(exc, aiohttp.ClientConnectorError | ConnectionRefusedError):
        return Retry(f"unreachable: {type(exc).__name__}")
    if isinstance(exc, asyncio.TimeoutError | TimeoutError | aiohttp.ClientError | OSError):
        return Retry(f"connection: {type(exc).__name__}", uncertain=True)
    return Retry(f"unexpected: {type(exc).__name__}: {exc}", uncertain=True)


class WebApiTransport:
    """Bot token + Web API: threads, files (upload v2), and metadata to find half-sent messages."""

    threads = True

    def __init__(self, client: AsyncWebClient, *, verify_in_flight: bool = True) -> None:
        self.client = client
        self.verify_in_flight = verify_in_flight

    async def post(
        self, channel: str, payload: dict[str, Any], thread_ts: str | None, key: str
    ) -> PostResult:
        kwargs: dict[str, Any] = {
            "channel": channel,
            "text": payload.get("text", ""),
            "unfurl_links": False,
            "unfurl_media": False,
            "metadata": {"event_type": METADATA_EVENT, "event_payload": {"key": key}},
        }
        if payload.get("blocks"):
            kwargs["blocks"] = payload["blocks"]
        if thread_ts:
            kwargs["thread_ts"] = thread_ts
            if payload.get("reply_broadcast"):
                kwargs["reply_broadcast"] = True
        try:
            resp = await self.client.chat_postMessage(**kwargs)
        except Exception as exc:
            raise classify(exc) from exc
        return PostResult(ts=str(resp.get("ts")) if resp.get("ts") else None)

    async def update(self, channel: str, ts: str, payload: dict[str, Any]) -> PostResult:
        """chat.update of one of our messages (the thread's first, given a link found later)."""
        kwargs: dict[str, Any] = {"channel": channel, "ts": ts, "text": payload.get("text", "")}
        if payload.get("blocks"):
            kwargs["blocks"] = payload["blocks"]
        try:
            await self.client.chat_update(**kwargs)
        except Exception as exc:
            raise classify(exc) from exc
        return PostResult(ts=ts)

    async def upload(
        self, channel: str, thread_ts: str | None, data: bytes, filename: str, title: str, comment: str
    ) -> PostResult:
        try:
            resp = await self.client.files_upload_v2(
                channel=channel,
                thread_ts=thread_ts,
                content=data,
                filename=filename,
                title=title,
                initial_comment=comment or None,
            )
        except Exception as exc:
            raise classify(exc) from exc
        file = resp.get("file") or {}
        return PostResult(ts=str(file.get("id")) if isinstance(file, dict) and file.get("id") else None)

    async def find_sent(self, channel: str, thread_ts: str | None, key: str, oldest: float) -> str | None:
        """Look for our own message by its metadata key (needs channels:history / groups:history)."""
        if not self.verify_in_flight:
            return None
        try:
            if thread_ts:
                resp = await self.client.conversations_replies(
                    channel=channel, ts=thread_ts, include_all_metadata=True, limit=200
                )
            else:
                resp = await self.client.conversations_history(
                    channel=channel, oldest=f"{oldest:.6f}", include_all_metadata=True, limit=200
                )
        except Exception as exc:
            raise classify(exc) from exc
        for msg in resp.get("messages") or []:
            meta = msg.get("metadata") or {}
            if (
                meta.get("event_type") == METADATA_EVENT
                and (meta.get("event_payload") or {}).get("key") == key
            ):
                return str(msg.get("ts"))
        return None


class WebhookTransport:
    """Incoming webhook: notifications only, no threads, no files (a plot becomes a line with its path)."""

    threads = False

    def __init__(self, client: AsyncWebhookClient) -> None:
        self.client = client

    async def _send(self, body: dict[str, Any]) -> PostResult:
        try:
            resp = await self.client.send_dict(body)
        except Exception as exc:
            raise classify(exc) from exc
        if resp.status_code == 200:
            return PostResult(ts=None)
        if resp.status_code == 429:
            raise Retry("ratelimited", after=retry_after(resp.headers) or 1.0)
        if resp.status_code >= 500:
            raise Retry(f"webhook {resp.status_code}", uncertain=True)
        if resp.status_code in (401, 403, 404, 410):
            raise Blocked(f"webhook {resp.status_code} {resp.body[:100]}")
        raise Permanent(f"webhook {resp.status_code} {resp.body[:100]}")

    async def post(
        self, channel: str, payload: dict[str, Any], thread_ts: str | None, key: str
    ) -> PostResult:
        body: dict[str, Any] = {"text": payload.get("text", "")}
        if payload.get("blocks"):
            body["blocks"] = payload["blocks"]
        return await self._send(body)

    async def upload(
        self, channel: str, thread_ts: str | None, data: bytes, filename: str, title: str, comment: str
    ) -> PostResult:
        return await self._send(
            {"text": f"{title}: plot `{filename}` ({len(data)} bytes) — {comment}".strip()}
        )

    async def find_sent(self, channel: str, thread_ts: str | None, key: str, oldest: float) -> str | None:
        return None

    async def update(self, channel: str, ts: str, payload: dict[str, Any]) -> PostResult:
        """A webhook cannot edit a message: the sender posts the change as a message of its own instead."""
        return await self._send({"text": payload.get("text", "")})
