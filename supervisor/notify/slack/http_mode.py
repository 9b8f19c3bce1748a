"""HTTP mode for sites that prefer a request URL over Socket Mode.

The signature over the *raw* body and the timestamp's age are checked before the
body is parsed or anything else happens; a request that fails gets 401 and nothing
more. Valid requests are acked at once (empty 200) and handled in a task.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs

import structlog
from aiohttp import web
from slack_sdk.signature import Clock, SignatureVerifier

from supervisor.domain.boundedjson import InputRefused, loads_bounded
from supervisor.notify.slack.handler import CommandHandler, Invocation, from_action, from_slash

log = structlog.get_logger(__name__)

MAX_BODY = 256 * 1024
MAX_DEPTH = 32  # Slack's block_actions payloads nest about 8 deep
MAX_FIELDS = 100  # a slash command posts about 15 form fields
MAX_AGE_S = 300


class _FnClock(Clock):
    def __init__(self, fn: Callable[[], float]) -> None:
        self.fn = fn

    def now(self) -> float:
        return self.fn()


def verify(secret: str, body: bytes, timestamp: str | None, signature: str | None, now: float) -> bool:
    """Slack's v0 HMAC over `v0:{ts}:{raw body}`, and a timestamp within 5 minutes."""
    if not timestamp or not signature or not timestamp.isdigit() or len(timestamp) > 12:
        return False
    if abs(now - int(timestamp)) > MAX_AGE_S:
        return False
    return SignatureVerifier(secret, clock=_FnClock(lambda: now)).is_valid(body, timestamp, signature)


def make_app(
    signing_secret: str,
    handler: CommandHandler,
    *,
    path: str = "/slack/events",
    clock: Callable[[], float] = time.time,
) -> web.Application:
    tasks: set[asyncio.Task[str]] = set()

    async def endpoint(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        if not verify(
            signing_secret,
            body,
            request.headers.get("X-Slack-Request-Timestamp"),
            request.headers.get("X-Slack-Signature"),
            clock(),
        ):
            log.warning("slack_http_bad_signature", remote=request.remote)
            return web.Response(status=401, text="invalid signature")
        inv = _invocation(body, request.content_type)
        if isinstance(inv, web.Response):
            return inv
        if inv is not None:
            task = asyncio.create_task(handler.handle(inv))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        return web.Response(status=200)

    app = web.Application(client_max_size=MAX_BODY)
    app.router.add_post(path, endpoint)
    return app


def _invocation(body: bytes, content_type: str) -> Invocation | web.Response | None:
    """What a verified request asks for; 400 for a body past the bounds (depth, field count) or garbage."""
    if content_type == "application/json":
        try:
            data: Any = loads_bounded(body, what="request body", max_bytes=MAX_BODY, max_depth=MAX_DEPTH)
        except InputRefused as exc:
            log.warning("slack_http_bad_body", error=str(exc))
            return web.Response(status=400)
        if isinstance(data, dict) and data.get("type") == "url_verification":
            return web.json_response({"challenge": str(data.get("challenge", ""))[:200]})
        return None
    try:
        fields = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True, max_num_fields=MAX_FIELDS)
    except ValueError:  # more fields than any Slack request has
        log.warning("slack_http_bad_body", error="too many form fields")
        return web.Response(status=400)
    form = {k: v[0] for k, v in fields.items()}
    if form.get("ssl_check"):
        return None
    if "payload" in form:
        try:
            payload = loads_bounded(form["payload"], what="payload", max_bytes=MAX_BODY, max_depth=MAX_DEPTH)
        except InputRefused as exc:
            log.warning("slack_http_bad_body", error=str(exc))
            return web.Response(status=400)
        return from_action(payload) if isinstance(payload, dict) else None
    if "command" in form:
        return from_slash(form)
    return None


async def serve(app: web.Application, host: str, port: int) -> None:
    """Run until cancelled."""
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    log.info("slack_http_listening", host=host, port=port)
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()
