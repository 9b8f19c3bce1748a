"""Socket Mode: commands arrive over an outbound websocket, so no public endpoint on a login node.

Ack first (Slack wants it within 3 s), then do the work in a task; the outcome goes
back ephemerally and into the run's thread. slack-sdk's aiohttp client reconnects by
itself on `disconnect` envelopes, closed sockets and dead pings.
"""

from __future__ import annotations

import asyncio
from typing import Any

import structlog
from slack_sdk.socket_mode.aiohttp import SocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse
from slack_sdk.web.async_client import AsyncWebClient

from supervisor.notify.slack.handler import CommandHandler, Invocation, from_action, from_slash

log = structlog.get_logger(__name__)


class SocketModeRunner:
    def __init__(
        self,
        app_token: str,
        web_client: AsyncWebClient,
        handler: CommandHandler,
        *,
        ping_interval: float = 5.0,
    ) -> None:
        self.app_token = app_token
        self.web_client = web_client
        self.handler = handler
        self.ping_interval = ping_interval
        self.client: SocketModeClient | None = None
        self._tasks: set[asyncio.Task[str]] = set()
        self.connected = asyncio.Event()

    async def run(self) -> None:
        """Connect and serve until cancelled. The client must be created inside the running loop."""
        client = SocketModeClient(
            app_token=self.app_token,
            web_client=self.web_client,
            auto_reconnect_enabled=True,
            ping_interval=self.ping_interval,
        )
        client.socket_mode_request_listeners.append(self._on_request)  # type: ignore[arg-type]
        self.client = client
        try:
            await client.connect()  # type: ignore[no-untyped-call]
            self.connected.set()
            log.info("slack_socket_connected")
            await asyncio.Event().wait()
        finally:
            self.connected.clear()
            await client.close()  # type: ignore[no-untyped-call]
            for t in list(self._tasks):
                t.cancel()

    async def _on_request(self, client: SocketModeClient, req: SocketModeRequest) -> None:
        await client.send_socket_mode_response(SocketModeResponse(envelope_id=req.envelope_id))
        payload: dict[str, Any] = req.payload if isinstance(req.payload, dict) else {}
        inv: Invocation | None
        if req.type == "slash_commands":
            inv = from_slash(payload)
        elif req.type == "interactive":
            inv = from_action(payload)
        else:
            inv = None
        if inv is None:
            return
        task = asyncio.create_task(self.handler.handle(inv))
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[str]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("slack_command_task_failed", error=type(task.exception()).__name__)
