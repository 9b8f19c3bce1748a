"""A loopback Slack for tests and the demo: enough Web API and Socket Mode, and a recorder.

The daemon talks to it with the real slack-sdk clients (``base_url=http://127.0.0.1:PORT/api/``)
and never knows the difference. Tests drive it: send slash-command and button envelopes over
Socket Mode, answer 429 with Retry-After, go down (connections refused) and come back on the
same port, and assert on everything recorded (messages with channel/thread_ts/text/blocks,
uploads with their bytes, ephemerals, acks).

Stand-alone (for the demo): ``python -m supervisor.testing.slack_standin --port 8765``; then
``GET /_standin/recorded``, ``POST /_standin/slash {"command","text","user_id","channel_id"}``,
``POST /_standin/action {"action_id","value","user_id","channel_id"}``,
``POST /_standin/down?seconds=N`` and ``POST /_standin/ratelimit?n=N&retry_after=S``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import secrets
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import WSMsgType, web

_JSON_FIELDS = ("blocks", "attachments", "metadata", "files")


@dataclass
class Recording:
    calls: list[dict[str, Any]] = field(default_factory=list)  # every Web API call, in order
    messages: list[dict[str, Any]] = field(default_factory=list)  # chat.postMessage
    updates: list[dict[str, Any]] = field(default_factory=list)  # chat.update
    ephemerals: list[dict[str, Any]] = field(default_factory=list)  # chat.postEphemeral
    uploads: dict[str, dict[str, Any]] = field(default_factory=dict)  # file id -> {filename, length, data}
    completed_uploads: list[dict[str, Any]] = field(default_factory=list)  # files.completeUploadExternal
    responses: list[dict[str, Any]] = field(default_factory=list)  # posts to response_url
    webhooks: list[dict[str, Any]] = field(default_factory=list)  # incoming-webhook posts
    acks: list[dict[str, Any]] = field(default_factory=list)  # Socket Mode acks
    rate_limited: list[str] = field(default_factory=list)  # methods answered with 429
    socket_connections: int = 0

    def as_json(self) -> dict[str, Any]:
        return {
            "messages": self.messages,
            "updates": self.updates,
            "ephemerals": self.ephemerals,
            "uploads": {k: {**v, "data": len(v.get("data") or b"")} for k, v in self.uploads.items()},
            "completed_uploads": self.completed_uploads,
            "responses": self.responses,
            "webhooks": self.webhooks,
            "acks": self.acks,
            "rate_limited": self.rate_limited,
            "socket_connections": self.socket_connections,
        }


class SlackStandin:
    """One aiohttp server on 127.0.0.1: Web API under /api/, Socket Mode at /socket/, uploads at /upload/."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host = host
        self.port = port
        self.rec = Recording()
        self.down = False
        self._runner: web.AppRunner | None = None
        self._sockets: set[web.WebSocketResponse] = set()
        self._socket_ready = asyncio.Event()
        self._ack_waiters: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._ratelimit: list[tuple[set[str] | None, float]] = []
        self._fail: dict[str, list[str]] = {}
        self._last_ts = 0.0
        self._ids = itertools.count(1)
        self._tasks: set[asyncio.Task[None]] = set()

    # -- lifecycle --------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def api_url(self) -> str:
        return f"{self.url}/api/"

    @property
    def webhook_url(self) -> str:
        return f"{self.url}/webhook/T000/B000/standin"

    def _app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/api/{method}", self._api)
        app.router.add_get("/socket/{ticket}", self._socket)
        app.router.add_post("/upload/{file_id}", self._upload)
        app.router.add_post("/response/{rid}", self._response)
        app.router.add_post("/webhook/{path:.*}", self._webhook)
        app.router.add_get("/_standin/recorded", self._ctl_recorded)
        app.router.add_post("/_standin/slash", self._ctl_slash)
        app.router.add_post("/_standin/action", self._ctl_action)
        app.router.add_post("/_standin/down", self._ctl_down)
        app.router.add_post("/_standin/ratelimit", self._ctl_ratelimit)
        return app

    async def start(self) -> SlackStandin:
        runner = web.AppRunner(self._app(), handle_signals=False, shutdown_timeout=0.5)
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port, reuse_address=True)
        await site.start()
        if self.port == 0:
            self.port = int(runner.addresses[0][1])
        self._runner = runner
        self.down = False
        return self

    async def stop(self) -> None:
        for ws in list(self._sockets):
            await ws.close()
        self._sockets.clear()
        self._socket_ready.clear()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def go_down(self) -> None:
        """Close everything and stop listening: clients get 'connection refused' until `come_back`."""
        await self.stop()
        self.down = True

    async def come_back(self) -> None:
        await self.start()

    async def __aenter__(self) -> SlackStandin:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- test controls ----------------------------------------------------------------------------

    def rate_limit(self, n: int = 1, retry_after: float = 1.0, methods: Iterable[str] | None = None) -> None:
        """The next `n` calls (to `methods`, or any) get HTTP 429 with Retry-After."""
        for _ in range(n):
            self._ratelimit.append((set(methods) if methods else None, retry_after))

    def fail_next(self, method: str, error: str, n: int = 1) -> None:
        """The next `n` calls to `method` answer ``{"ok": false, "error": error}``."""
        self._fail.setdefault(method, []).extend([error] * n)

    def thread(self, ts: str) -> list[dict[str, Any]]:
        """Replies in the thread opened by message `ts`, in arrival order."""
        return [m for m in self.rec.messages if m.get("thread_ts") == ts]

    def top_level(self, channel: str | None = None) -> list[dict[str, Any]]:
        return [
            m
            for m in self.rec.messages
            if not m.get("thread_ts") and (channel is None or m["channel"] == channel)
        ]

    async def wait_connected(self, within: float = 5.0) -> None:
        await asyncio.wait_for(self._socket_ready.wait(), within)

    async def send_envelope(self, type_: str, payload: dict[str, Any]) -> str:
        """Push an envelope to the newest Socket Mode connection; returns its envelope id."""
        await self.wait_connected()
        ws = list(self._sockets)[-1]
        eid = f"env-{next(self._ids)}-{secrets.token_hex(3)}"
        self._ack_waiters[eid] = asyncio.get_running_loop().create_future()
        await ws.send_json(
            {"envelope_id": eid, "type": type_, "payload": payload, "accepts_response_payload": True}
        )
        return eid

    async def send_slash(self, command: str, text: str, user_id: str, channel_id: str = "C0TEST") -> str:
        rid = f"r{next(self._ids)}"
        payload = {
            "token": "legacy-verification-token",
            "team_id": "T000",
            "channel_id": channel_id,
            "user_id": user_id,
            "user_name": user_id.lower(),
            "command": command,
            "text": text,
            "response_url": f"{self.url}/response/{rid}",
            "trigger_id": f"trig-{rid}",
        }
        return await self.send_envelope("slash_commands", payload)

    async def press_button(
        self,
        action_id: str,
        value: str,
        user_id: str,
        channel_id: str = "C0TEST",
        message: dict[str, Any] | None = None,
    ) -> str:
        rid = f"r{next(self._ids)}"
        message = message or {"ts": "0", "blocks": []}
        payload = {
            "type": "block_actions",
            "user": {"id": user_id, "username": user_id.lower()},
            "team": {"id": "T000"},
            "channel": {"id": channel_id},
            "container": {"type": "message", "message_ts": message.get("ts"), "channel_id": channel_id},
            "message": message,
            "response_url": f"{self.url}/response/{rid}",
            "actions": [{"type": "button", "action_id": action_id, "value": value, "block_id": "b"}],
        }
        return await self.send_envelope("interactive", payload)

    async def wait_ack(self, envelope_id: str, within: float = 3.0) -> dict[str, Any]:
        return await asyncio.wait_for(asyncio.shield(self._ack_waiters[envelope_id]), within)

    async def disconnect_sockets(self) -> None:
        """Ask clients to reconnect, like Slack does every few hours."""
        self._socket_ready.clear()
        for ws in list(self._sockets):
            with contextlib.suppress(Exception):
                await ws.send_json({"type": "disconnect", "reason": "refresh_requested"})

    # -- Web API ----------------------------------------------------------------------------------

    def _next_ts(self) -> str:
        ts = max(time.time(), self._last_ts + 0.000001)
        self._last_ts = ts
        return f"{ts:.6f}"

    async def _args(self, request: web.Request) -> dict[str, Any]:
        args: dict[str, Any] = dict(request.query)
        if request.method == "POST" and request.can_read_body:
            if request.content_type == "application/json":
                body = await request.json()
                if isinstance(body, dict):
                    args.update(body)
            else:
                form = await request.post()
                args.update({k: v for k, v in form.items() if isinstance(v, str)})
        for k in _JSON_FIELDS:
            if isinstance(args.get(k), str):
                with contextlib.suppress(ValueError):
                    args[k] = json.loads(args[k])
        return args

    async def _api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        args = await self._args(request)
        auth = request.headers.get("Authorization", "")
        self.rec.calls.append({"method": method, "args": args})
        for i, (methods, retry_after) in enumerate(self._ratelimit):
            if methods is None or method in methods:
                del self._ratelimit[i]
                self.rec.rate_limited.append(method)
                return web.json_response(
                    {"ok": False, "error": "ratelimited"},
                    status=429,
                    headers={"Retry-After": str(int(retry_after) if retry_after >= 1 else retry_after)},
                )
        if not auth.startswith("Bearer ") or len(auth) < 12:
            return web.json_response({"ok": False, "error": "not_authed"})
        if self._fail.get(method):
            return web.json_response({"ok": False, "error": self._fail[method].pop(0)})
        handler = getattr(self, "_m_" + method.replace(".", "_"), None)
        if handler is None:
            return web.json_response({"ok": False, "error": "unknown_method"})
        result: dict[str, Any] = handler(args)
        return web.json_response({"ok": True, **result})

    def _m_auth_test(self, args: dict[str, Any]) -> dict[str, Any]:
        return {
            "url": "https://standin.slack/",
            "team": "Stand-in",
            "user": "shepherd",
            "team_id": "T000",
            "user_id": "U0SHEPHERD",
            "bot_id": "B0SHEPHERD",
        }

    def _m_chat_postMessage(self, args: dict[str, Any]) -> dict[str, Any]:
        ts = self._next_ts()
        msg = {
            "channel": args.get("channel"),
            "ts": ts,
            "thread_ts": args.get("thread_ts") or None,
            "text": args.get("text"),
            "blocks": args.get("blocks"),
            "reply_broadcast": bool(args.get("reply_broadcast")),
            "metadata": args.get("metadata"),
        }
        self.rec.messages.append(msg)
        return {"channel": msg["channel"], "ts": ts, "message": {"text": msg["text"], "ts": ts}}

    def _m_chat_update(self, args: dict[str, Any]) -> dict[str, Any]:
        self.rec.updates.append(
            {
                "channel": args.get("channel"),
                "ts": args.get("ts"),
                "text": args.get("text"),
                "blocks": args.get("blocks"),
            }
        )
        return {"channel": args.get("channel"), "ts": args.get("ts")}

    def _m_chat_postEphemeral(self, args: dict[str, Any]) -> dict[str, Any]:
        self.rec.ephemerals.append(
            {
                "channel": args.get("channel"),
                "user": args.get("user"),
                "text": args.get("text"),
                "blocks": args.get("blocks"),
            }
        )
        return {"message_ts": self._next_ts()}

    def _m_files_getUploadURLExternal(self, args: dict[str, Any]) -> dict[str, Any]:
        fid = f"F{next(self._ids):08d}"
        self.rec.uploads[fid] = {
            "filename": args.get("filename"),
            "length": int(args.get("length") or 0),
            "data": None,
        }
        return {"upload_url": f"{self.url}/upload/{fid}", "file_id": fid}

    def _m_files_completeUploadExternal(self, args: dict[str, Any]) -> dict[str, Any]:
        files = args.get("files") or []
        record = {
            "files": files,
            "channel_id": args.get("channel_id"),
            "thread_ts": args.get("thread_ts"),
            "initial_comment": args.get("initial_comment"),
        }
        self.rec.completed_uploads.append(record)
        return {"files": [{"id": f.get("id"), "title": f.get("title")} for f in files if isinstance(f, dict)]}

    def _m_files_info(self, args: dict[str, Any]) -> dict[str, Any]:
        return {
            "file": {
                "id": args.get("file"),
                **{k: v for k, v in self.rec.uploads.get(str(args.get("file")), {}).items() if k != "data"},
            }
        }

    def _m_apps_connections_open(self, args: dict[str, Any]) -> dict[str, Any]:
        return {"url": f"ws://{self.host}:{self.port}/socket/{secrets.token_hex(8)}"}

    def _history(self, channel: str | None, pick: Any) -> dict[str, Any]:
        out = []
        for m in self.rec.messages:
            if m["channel"] == channel and pick(m):
                out.append(
                    {
                        "ts": m["ts"],
                        "thread_ts": m["thread_ts"],
                        "text": m["text"],
                        **({"metadata": m["metadata"]} if m.get("metadata") else {}),
                    }
                )
        return {"messages": out, "has_more": False}

    def _m_conversations_history(self, args: dict[str, Any]) -> dict[str, Any]:
        oldest = float(args.get("oldest") or 0)
        return self._history(args.get("channel"), lambda m: not m["thread_ts"] and float(m["ts"]) >= oldest)

    def _m_conversations_replies(self, args: dict[str, Any]) -> dict[str, Any]:
        ts = args.get("ts")
        return self._history(args.get("channel"), lambda m: m["ts"] == ts or m["thread_ts"] == ts)

    # -- uploads, response_url, webhooks ----------------------------------------------------------

    async def _upload(self, request: web.Request) -> web.Response:
        fid = request.match_info["file_id"]
        if fid not in self.rec.uploads:
            return web.Response(status=404)
        self.rec.uploads[fid]["data"] = await request.read()
        return web.Response(text=f"OK - {len(self.rec.uploads[fid]['data'])}")

    async def _response(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.rec.responses.append({"rid": request.match_info["rid"], **body})
        return web.Response(text="ok")

    async def _webhook(self, request: web.Request) -> web.Response:
        for i, (methods, retry_after) in enumerate(self._ratelimit):
            if methods is None or "webhook" in methods:
                del self._ratelimit[i]
                self.rec.rate_limited.append("webhook")
                return web.Response(
                    status=429, text="rate_limited", headers={"Retry-After": str(retry_after)}
                )
        body = await request.json()
        self.rec.webhooks.append(body)
        return web.Response(text="ok")

    # -- Socket Mode ------------------------------------------------------------------------------

    async def _socket(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(autoping=True)
        await ws.prepare(request)
        self._sockets.add(ws)
        self.rec.socket_connections += 1
        await ws.send_json(
            {
                "type": "hello",
                "num_connections": len(self._sockets),
                "debug_info": {"host": "standin", "approximate_connection_time": 3600},
                "connection_info": {"app_id": "A0STANDIN"},
            }
        )
        self._socket_ready.set()
        try:
            async for msg in ws:
                if msg.type != WSMsgType.TEXT:
                    continue
                with contextlib.suppress(ValueError):
                    data = json.loads(msg.data)
                    if isinstance(data, dict) and "envelope_id" in data:
                        data["at"] = time.time()
                        self.rec.acks.append(data)
                        fut = self._ack_waiters.get(str(data["envelope_id"]))
                        if fut is not None and not fut.done():
                            fut.set_result(data)
        finally:
            self._sockets.discard(ws)
            if not self._sockets:
                self._socket_ready.clear()
        return ws

    # -- control endpoints for the stand-alone demo -----------------------------------------------

    async def _ctl_recorded(self, request: web.Request) -> web.Response:
        return web.json_response(self.rec.as_json())

    async def _ctl_slash(self, request: web.Request) -> web.Response:
        if not self._sockets:
            return web.json_response({"ok": False, "error": "no Socket Mode client connected"}, status=409)
        b = await request.json()
        eid = await self.send_slash(
            str(b["command"]), str(b.get("text", "")), str(b["user_id"]), str(b.get("channel_id", "C0TEST"))
        )
        return web.json_response({"envelope_id": eid})

    async def _ctl_action(self, request: web.Request) -> web.Response:
        if not self._sockets:
            return web.json_response({"ok": False, "error": "no Socket Mode client connected"}, status=409)
        b = await request.json()
        eid = await self.press_button(
            str(b["action_id"]),
            str(b["value"]),
            str(b["user_id"]),
            str(b.get("channel_id", "C0TEST")),
            b.get("message"),
        )
        return web.json_response({"envelope_id": eid})

    async def _ctl_down(self, request: web.Request) -> web.Response:
        seconds = float(request.query.get("seconds", "10"))

        async def outage() -> None:
            await asyncio.sleep(0.1)
            await self.go_down()
            await asyncio.sleep(seconds)
            await self.come_back()

        task = asyncio.create_task(outage())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return web.json_response({"down_for": seconds})

    async def _ctl_ratelimit(self, request: web.Request) -> web.Response:
        self.rate_limit(int(request.query.get("n", "1")), float(request.query.get("retry_after", "1")))
        return web.json_response({"ok": True})


async def _serve(host: str, port: int, port_file: str | None = None) -> None:
    standin = await SlackStandin(host, port).start()
    print(f"slack stand-in on {standin.url} (Web API base_url {standin.api_url})", flush=True)
    if port_file:
        tmp = f"{port_file}.tmp"
        with open(tmp, "w") as fh:
            fh.write(str(standin.port))
        os.replace(tmp, port_file)  # readers never see a half-written port
    try:
        await asyncio.Event().wait()
    finally:
        await standin.stop()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="Loopback Slack stand-in (Web API + Socket Mode) for demos")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file", default=None, help="write the port listened on here (for --port 0)")
    args = ap.parse_args(argv)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve(args.host, args.port, args.port_file))


if __name__ == "__main__":
    main()
