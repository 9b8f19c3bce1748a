"""One path for every command, whether it came over Socket Mode, HTTP, or a button.

parse -> authorise -> audit -> RunControl -> audit outcome -> reply (ephemeral) and
note it in the run's thread. A refused or malformed command never reaches RunControl.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import structlog
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.webhook.async_client import AsyncWebhookClient

from supervisor.notify.silences import RULE_PREFIX
from supervisor.notify.slack import blocks as bk
from supervisor.notify.slack import commands as cmds
from supervisor.notify.slack.notifier import Notifier
from supervisor.ports import ControlError, RunControl
from supervisor.redact import redact
from supervisor.store import transaction

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class Invocation:
    """What somebody asked for, and where to answer them."""

    source: str  # "slash" | "button"
    user_id: str
    channel_id: str | None
    raw: str
    parsed: cmds.Parsed
    response_url: str | None = None
    message_ts: str | None = None
    message_blocks: Sequence[dict[str, Any]] = field(default_factory=tuple)


def _s(v: Any, limit: int = 200) -> str:
    return v[:limit] if isinstance(v, str) else ""


def from_slash(payload: dict[str, Any]) -> Invocation:
    command, text = _s(payload.get("command"), 40), _s(payload.get("text"), 2000)
    return Invocation(
        source="slash",
        user_id=_s(payload.get("user_id"), 40),
        channel_id=_s(payload.get("channel_id"), 40) or None,
        raw=f"{command} {text}".strip(),
        parsed=cmds.parse_slash(command, text),
        response_url=_s(payload.get("response_url"), 500) or None,
    )


def from_action(payload: dict[str, Any]) -> Invocation | None:
    """A `block_actions` payload (one of our buttons); None for other interactive payloads."""
    if payload.get("type") != "block_actions":
        return None
    actions = payload.get("actions")
    if not isinstance(actions, list) or not actions or not isinstance(actions[0], dict):
        return None
    action = actions[0]
    action_id, value = _s(action.get("action_id"), 80), _s(action.get("value"), 200)
    user = payload.get("user") or {}
    channel = payload.get("channel") or {}
    container = payload.get("container") or {}
    message = payload.get("message") or {}
    return Invocation(
        source="button",
        user_id=_s(user.get("id") if isinstance(user, dict) else None, 40),
        channel_id=_s(channel.get("id") if isinstance(channel, dict) else None, 40) or None,
        raw=f"button {action_id} {value}",
        parsed=cmds.parse_action(action_id, value),
        response_url=_s(payload.get("response_url"), 500) or None,
        message_ts=_s((container if isinstance(container, dict) else {}).get("message_ts"), 40) or None,
        message_blocks=_blocks(message.get("blocks") if isinstance(message, dict) else None),
    )


MAX_BLOCKS = 50  # Slack's own limit per message


def _blocks(value: Any) -> tuple[dict[str, Any], ...]:
    """The pressed message's blocks, to re-post without the buttons: kept only when they are what Slack
    sends (a list of at most 50 objects); anything else is dropped and the buttons are left alone."""
    if not isinstance(value, list) or len(value) > MAX_BLOCKS or not all(isinstance(b, dict) for b in value):
        return ()
    return tuple(value)


class Responder(Protocol):
    async def ephemeral(self, inv: Invocation, text: str) -> None: ...
    async def replace_buttons(self, inv: Invocation, note: str) -> None: ...


class WebResponder:
    """Ephemeral replies via chat.postEphemeral, falling back to the response_url."""

    def __init__(self, client: AsyncWebClient) -> None:
        self.client = client

    async def ephemeral(self, inv: Invocation, text: str) -> None:
        if inv.channel_id:
            try:
                await self.client.chat_postEphemeral(channel=inv.channel_id, user=inv.user_id, text=text)
                return
            except SlackApiError as exc:
                log.info("slack_ephemeral_fallback", error=str(exc.response.get("error")))
            except Exception as exc:
                log.warning("slack_ephemeral_failed", error=type(exc).__name__)
        if inv.response_url:
            try:
                await AsyncWebhookClient(inv.response_url).send(text=text, response_type="ephemeral")
            except Exception as exc:
                log.warning("slack_response_url_failed", error=type(exc).__name__)

    async def replace_buttons(self, inv: Invocation, note: str) -> None:
        if not (inv.channel_id and inv.message_ts and inv.message_blocks):
            return
        try:
            await self.client.chat_update(
                channel=inv.channel_id,
                ts=inv.message_ts,
                text=note,
                blocks=bk.acted(list(inv.message_blocks), note),
            )
        except Exception as exc:
            log.warning("slack_update_failed", error=type(exc).__name__)


class CommandHandler:
    def __init__(
        self,
        db: sqlite3.Connection,
        policy: cmds.AuthPolicy,
        control: RunControl,
        notifier: Notifier | None,
        responder: Responder,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.db = db
        self.policy = policy
        self.control = control
        self.notifier = notifier
        self.responder = responder
        self.clock = clock

    async def handle(self, inv: Invocation) -> str:
        """Run one invocation to the end; returns the text replied to the caller."""
        reply = await self._decide(inv)
        reply = redact(reply, self.notifier.extra_secrets if self.notifier else ())
        await self.responder.ephemeral(inv, reply)
        return reply

    async def _decide(self, inv: Invocation) -> str:
        parsed = inv.parsed
        if isinstance(parsed, cmds.ParseError):
            self._audit(inv, None, None, False, "bad_request", parsed.message)
            return parsed.message
        action, run = cmds.action_name(parsed), cmds.command_run(parsed)
        verdict = cmds.authorise(parsed, inv.user_id, inv.channel_id, self.policy)
        if not verdict.allowed:
            log.warning(
                "slack_command_refused",
                user=inv.user_id,
                channel=inv.channel_id,
                action=action,
                reason=verdict.reason,
            )
            self._audit(inv, action, run, False, "refused", verdict.reason)
            return verdict.message
        if isinstance(parsed, cmds.Help):
            self._audit(inv, action, None, True, "ok", None)
            return cmds.HELP_TEXT
        audit_id = self._audit(inv, action, run, True, "started", None)
        try:
            message = await self._dispatch(parsed, inv.user_id)
        except ControlError as exc:
            self._finish(audit_id, "rejected", str(exc))
            return f":no_entry: {exc}"
        except Exception as exc:
            log.exception("slack_command_failed", action=action, run=run)
            self._finish(audit_id, "error", type(exc).__name__)
            return ":boom: Shepherd hit an internal error doing that; it is logged on the supervisor host."
        self._finish(audit_id, "ok", message)
        if not isinstance(parsed, cmds.Status | cmds.Plot | cmds.Report):  # looking leaves no note
            self._note_in_thread(inv, parsed, message)
        return message

    async def _dispatch(self, cmd: cmds.Command, actor: str) -> str:
        c = self.control
        match cmd:
            case cmds.Resume(run, checkpoint, sets):
                return await c.resume(run, checkpoint, actor, sets)
            case cmds.Status(run):
                return await c.status(run)
            case cmds.Cancel(run):
                return await c.cancel(run, actor)
            case cmds.Hold(run):
                return await c.hold(run, actor)
            case cmds.Release(run):
                return await c.release(run, actor)
            case cmds.GiveUp(run):
                return await c.give_up(run, actor)
            case cmds.Plot(run):
                return await c.plot(run, actor)
            case cmds.Report(run):
                return await c.report(run, actor)
            case cmds.Silence(target, seconds):
                message = await c.silence(target, seconds, actor)
                if self.notifier is not None:
                    run_id = self.notifier.resolve_run(target) if not target.startswith(RULE_PREFIX) else None
                    self.notifier.silences.add(run_id or target, seconds, actor)
                return message
        raise AssertionError(f"unhandled command {cmd!r}")  # pragma: no cover

    def _note_in_thread(self, inv: Invocation, cmd: cmds.Command, message: str) -> None:
        """The action goes into the run's thread, so the thread stays the run's whole story."""
        run = cmds.command_run(cmd)
        if self.notifier is None or run is None:
            return
        run_id = self.notifier.resolve_run(run)
        label = cmds.action_name(cmd).replace("_", " ")
        if isinstance(cmd, cmds.Resume):
            label += f" from {cmd.checkpoint}"
        if run_id is not None:
            self.notifier.event(
                run_id, "command", f"{label.capitalize()} requested", message, actor=inv.user_id
            )
        if inv.source == "button":
            who = bk.mention(inv.user_id) or "someone"
            coro = self.responder.replace_buttons(inv, f"{label.capitalize()} requested by {who}")
            task = asyncio.ensure_future(coro)
            _BACKGROUND.add(task)
            task.add_done_callback(_BACKGROUND.discard)

    def _audit(
        self,
        inv: Invocation,
        action: str | None,
        run: str | None,
        authorised: bool,
        outcome: str,
        msg: str | None,
    ) -> int:
        with transaction(self.db) as db:
            cur = db.execute(
                "INSERT INTO slack_commands(at, user_id, channel_id, source, raw, action, run, authorised,"
                " outcome, message) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    self.clock(),
                    inv.user_id,
                    inv.channel_id,
                    inv.source,
                    redact(inv.raw[:500]),
                    action,
                    run,
                    int(authorised),
                    outcome,
                    redact(msg[:1000]) if msg else None,
                ),
            )
            return int(cur.lastrowid or 0)

    def _finish(self, audit_id: int, outcome: str, msg: str | None) -> None:
        with transaction(self.db) as db:
            db.execute(
                "UPDATE slack_commands SET outcome = ?, message = ? WHERE id = ?",
                (outcome, redact(msg[:1000]) if msg else None, audit_id),
            )


_BACKGROUND: set[asyncio.Future[None]] = set()


def audit_log(db: sqlite3.Connection, limit: int = 100) -> list[dict[str, Any]]:
    """The command audit log, newest first (for `shepherd` CLI output and tests)."""
    cols = [
        "id",
        "at",
        "user_id",
        "channel_id",
        "source",
        "raw",
        "action",
        "run",
        "authorised",
        "outcome",
        "message",
    ]
    rows = db.execute(
        f"SELECT {', '.join(cols)} FROM slack_commands ORDER BY id DESC LIMIT ?", (limit,)
    ).fetchall()
    return [dict(zip(cols, r, strict=True)) for r in rows]
