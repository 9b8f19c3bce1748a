"""The daemon's voice in Slack: a synchronous SQLite outbox and an async sender.

Why an outbox: supervision must never wait on Slack. `Notifier` methods only write
rows (microseconds, one transaction each) and return; `OutboxSender` delivers them
in id order per channel, retrying with backoff while Slack is unreachable and
honouring 429 Retry-After, so messages queued during an outage arrive afterwards,
in order, once.

Exactly-once, as close as Slack allows. A row is marked `in_flight` (committed)
before its HTTP call, and `sent_at` is written in the same transaction that learns
the ts (and, for a run's first message, stores the thread ts). The only window for
a duplicate is a crash between Slack accepting the message and that commit (the
time to parse one HTTP response and commit one row), or a timeout whose request
did arrive. Rows left in flight are looked up before they are sent again: every
message carries `metadata={event_type: shepherd_outbox, key: <db-instance>:<id>}`
and the sender searches the thread/channel history for it (needs `channels:history`;
without the scope, or for file uploads and webhooks, it resends: at-least-once).

Incidents (incidents.py): a run's alerts are grouped, Alertmanager-style, into one message per
incident (after a short group wait), bounded updates, reminders while it needs a human, and a
resolution message.

Flood bound (per run, fixed windows of `rate_window_s`, default 60 s): at most
`max_messages_per_run` (default 5) event messages; the rest are counted and posted
as one digest when the window ends. Identical events within `dedupe_window_s` are
dropped (and counted in the digest). The channel gets at most one "needs a human"
line per run per `dedupe_window_s`. Outside the bound, because each happens once per
run or per human action: the run's opening message, completed/gave-up, command
results, plots. So a crash loop of 20 failures in a minute posts at most 5 alerts +
1 digest in the thread and 1 line in the channel.

Transactions: `supervisor.store.transaction` (BEGIN IMMEDIATE, or a SAVEPOINT when the caller
already holds a transaction on the same connection).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import secrets
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from supervisor.notify.routing import UNBOUNDED_KINDS, IncidentView, held_back, route
from supervisor.notify.silences import Silences
from supervisor.notify.slack import blocks as bk
from supervisor.notify.slack import incidents as inc_
from supervisor.notify.slack.transport import (
    Blocked,
    DeliveryError,
    Permanent,
    PostResult,
    Retry,
    Transport,
    classify,
)
from supervisor.redact import redact
from supervisor.settings import SlackSettings
from supervisor.store import transaction

log = structlog.get_logger(__name__)

WEBHOOK_CHANNEL = "webhook"
_NO_REDACT_KEYS = frozenset({"type", "action_id", "block_id", "style", "value", "emoji"})
MAX_PERMANENT_ATTEMPTS = 3


def instance_id(db: sqlite3.Connection) -> str:
    """A random id for this database, so message keys from an older database never match."""
    row = db.execute("SELECT value FROM slack_meta WHERE key = 'instance'").fetchone()
    if row:
        return str(row[0])
    value = secrets.token_hex(6)
    db.execute("INSERT OR IGNORE INTO slack_meta(key, value) VALUES ('instance', ?)", (value,))
    return str(db.execute("SELECT value FROM slack_meta WHERE key = 'instance'").fetchone()[0])


def redact_blocks(obj: Any, extra: Sequence[str]) -> Any:
    if isinstance(obj, str):
        return redact(obj, extra)
    if isinstance(obj, list):
        return [redact_blocks(x, extra) for x in obj]
    if isinstance(obj, dict):
        return {k: (v if k in _NO_REDACT_KEYS else redact_blocks(v, extra)) for k, v in obj.items()}
    return obj


@dataclass(frozen=True, slots=True)
class Thread:
    run_id: str
    run_name: str
    channel: str
    level: str
    ts: str | None


def outbox_backlog(db: sqlite3.Connection) -> tuple[int, float | None]:
    """(messages not yet delivered, when the oldest of them was queued), for `status` and the metrics."""
    row = db.execute(
        "SELECT COUNT(*), MIN(created_at) FROM slack_outbox WHERE sent_at IS NULL AND dead = 0"
    ).fetchone()
    return int(row[0]), (float(row[1]) if row[1] is not None else None)


class Notifier:
    """Synchronous, never blocks on Slack. Returns the outbox id of what it queued, or None if held back."""

    def __init__(
        self,
        db: sqlite3.Connection,
        settings: SlackSettings,
        *,
        clock: Callable[[], float] = time.time,
        extra_secrets: Iterable[str] = (),
        on_enqueue: Callable[[], None] | None = None,
        run_state: Callable[[str], str | None] | None = None,
    ) -> None:
        self.db = db
        self.run_state = run_state  # the store's state of a run: an ended run's incident resolves
        self.timing = inc_.Timing(
            group_wait_s=settings.group_wait_s,
            group_interval_s=settings.group_interval_s,
            repeat_interval_s=settings.repeat_interval_s,
            resolve_after_s=settings.resolve_after_s,
        )
        self.settings = settings
        self.clock = clock
        self.extra_secrets = tuple(extra_secrets) + tuple(settings.secrets())
        self.on_enqueue = on_enqueue
        self.webhook = settings.mode == "webhook"
        self.silences = Silences(db, clock=clock)

    # -- public API -------------------------------------------------------------------------------

    def run_opened(
        self,
        run_id: str,
        name: str,
        spec_summary: str = "",
        job_id: str | None = None,
        log_paths: Sequence[str] = (),
        *,
        channel: str | None = None,
        level: str | None = None,
    ) -> int | None:
        """Open the run's thread (idempotent: a second call for the same run does nothing)."""
        if self.thread(run_id) is not None:
            return None
        chan = self._channel(channel)
        if chan is None:
            log.warning("slack_no_channel", run_id=run_id)
            return None
        text, blocks = bk.run_opened(name, run_id, spec_summary, job_id, log_paths)
        with transaction(self.db) as db:
            oid = self._insert(db, chan, run_id, "post", {"text": text, "blocks": blocks, "opens": run_id})
            db.execute(
                "INSERT INTO slack_threads(run_id, run_name, channel, level, opener_id, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (run_id, name, chan, level or self.settings.level, oid, self.clock()),
            )
        self._wake()
        return oid

    def event(
        self,
        run_id: str,
        kind: str,
        title: str,
        text: str = "",
        level: str = "info",
        excerpt: str | None = None,
        buttons: bool = False,
        *,
        needs_human: bool = False,
        rule: str | None = None,
        dedupe_key: str | None = None,
        actor: str | None = None,
        parent: str | None = None,
    ) -> int | None:
        """One event in the run's thread; grouped into incidents, flood-bounded, silenced, level-filtered.

        Returns the outbox id of the message queued for it, or None when it was held back or folded
        into an incident (whose message goes out later, see incidents.py).
        """
        now = self.clock()
        thread = self.thread(run_id) or self._implicit_thread(run_id)
        if thread is None:
            return None
        why = held_back(kind, level, thread.level, silenced=self.silenced(run_id, rule))
        if why is not None:
            log.info("slack_held_back", run_id=run_id, kind=kind, rule=rule, why=why)
            return None
        # Redacted before anything is kept: an incident stores its events in slack_incidents until it posts.
        headline = redact_blocks(
            {
                "kind": kind,
                "title": title,
                "text": text,
                "level": level,
                "excerpt": excerpt,
                "buttons": buttons,
                "needs_human": needs_human,
                "rule": rule,
                "actor": actor,
            },
            self.extra_secrets,
        )
        oid: int | None = None
        with transaction(self.db) as db:
            self._roll_window(db, thread, now)
            inc = self._open_incident(db, run_id)
            plan = route(
                kind,
                None if inc is None else IncidentView(posted=inc.message_id is not None),
                group_wait_s=self.timing.group_wait_s,
            )
            if plan.kind == "open_incident":
                inc = self._new_incident(db, run_id, headline, now, now + self.timing.group_wait_s)
                if plan.post_now:
                    oid = self._post_incident(db, thread, inc, now)
            elif plan.kind == "fold":
                assert inc is not None
                inc.pending.append(
                    inc_.entry(kind, title, rule=rule, level=level, parent=parent, needs_human=needs_human)
                )
                inc.events += 1
                inc.recovering_since = None  # the trouble goes on
                self._save_incident(db, inc)
            elif plan.kind == "headline":
                if inc is None or not plan.promote:
                    inc = self._new_incident(db, run_id, headline, now, now)
                else:  # the decision becomes the headline; the alerts it waited on are grouped under it
                    old = inc.headline
                    inc.pending.insert(
                        0,
                        inc_.entry(
                            str(old["kind"]),
                            str(old["title"]),
                            rule=old.get("rule"),
                            level=str(old["level"]),
                            needs_human=bool(old.get("needs_human")),
                        ),
                    )
                    inc.headline = headline
                    inc.events += 1
                oid = self._post_incident(db, thread, inc, now)
            else:
                if plan.flush_waiting and inc is not None:
                    self._post_incident(db, thread, inc, now)
                oid = self._post_event(db, thread, headline, now, dedupe_key)
                if inc is not None and plan.after == "count":
                    inc.events += 1
                    inc.recovering_since = None
                    self._save_incident(db, inc)
                elif inc is not None and plan.after == "resolve":
                    self._resolve_incident(
                        db, thread, inc, "the run completed" if kind == "completed" else title, now
                    )
                elif inc is not None and plan.after == "recovering":
                    inc.recovering_since = now
                    self._save_incident(db, inc)
        self._wake()
        return oid

    def flush_incidents(self) -> int:
        """Carry out what each open incident needs now (first message, update, repeat, resolution)."""
        now = self.clock()
        n = 0
        for seen in self._open_incidents(self.db):
            run_id = seen.run_id
            try:
                state = self.run_state(run_id) if self.run_state is not None else None
            except Exception:
                log.exception("slack_run_state_failed", run_id=run_id)
                state = None
            # Most open incidents have nothing due (a gave-up run waits for days): look before taking the
            # write lock, then look again under it.
            if inc_.next_step(seen, now, self.timing, state) is None:
                continue
            with transaction(self.db) as db:
                inc = self._open_incident(db, run_id)
                thread = self.thread(run_id)
                if inc is None or thread is None:
                    continue
                step = inc_.next_step(inc, now, self.timing, state)
                if step == "open":
                    self._post_incident(db, thread, inc, now)
                    if state in inc_.ENDED_RUN_STATES:
                        self._resolve_incident(db, thread, inc, f"the run is {state.lower()}", now)
                elif step == "update":
                    self._post_update(db, thread, inc, now)
                elif step == "repeat":
                    self._post_repeat(db, thread, inc, now)
                elif step == "resolve":
                    why = (
                        f"the run is {state.lower()}"
                        if state in inc_.ENDED_RUN_STATES
                        else f"running again for {inc_.duration(now - (inc.recovering_since or now))}"
                    )
                    self._resolve_incident(db, thread, inc, why, now)
                else:
                    continue
                n += 1
        if n:
            self._wake()
        return n

    def add_link(self, run_id: str, label: str, url: str) -> int | None:
        """A link found after the thread opened (the run's W&B page, from its logs) goes into the thread's
        first message: into its queued payload while unsent, else by editing it (an `update`, after it in the
        outbox; where messages cannot be edited, webhooks, it is posted as a line of its own). A newer link
        replaces the older. Returns the outbox id of the edit, or None when none was needed."""
        if not url:
            return None
        with transaction(self.db) as db:
            row = db.execute(
                "SELECT t.channel, o.id, o.payload, o.sent_at, o.in_flight FROM slack_threads t"
                " JOIN slack_outbox o ON o.id = t.opener_id WHERE t.run_id = ?",
                (run_id,),
            ).fetchone()
            if row is None:
                return None
            channel, opener_id, raw, sent_at, in_flight = row
            payload = json.loads(raw)
            blocks = [b for b in payload.get("blocks") or [] if b.get("block_id") != bk.LINK_BLOCK_ID]
            payload["blocks"] = [*blocks, bk.link(label, url)]
            payload = redact_blocks(payload, self.extra_secrets)
            db.execute("UPDATE slack_outbox SET payload = ? WHERE id = ?", (json.dumps(payload), opener_id))
            if sent_at is None and not in_flight:
                return None  # it goes out with the link
            edit = {"text": payload.get("text", ""), "blocks": payload["blocks"], "edits": run_id}
            oid = self._insert(db, channel, run_id, "update", edit, in_thread=False)
        self._wake()
        return oid

    def incidents(self, run_id: str | None = None) -> list[dict[str, Any]]:
        """Open incidents, for tests and tools (`shepherd status` reads the store): run, title, events."""
        return [
            {"run_id": i.run_id, "title": i.headline["title"], "events": i.events, "since": i.opened_at}
            for i in self._open_incidents(self.db, run_id)
        ]

    def upload_plot(self, run_id: str, png_path: Path, title: str) -> int | None:
        """Queue the picture itself (bytes in the outbox), so it survives the file being cleaned up."""
        thread = self.thread(run_id) or self._implicit_thread(run_id)
        if thread is None:
            return None
        data = Path(png_path).read_bytes()
        payload = {
            "title": redact(title, self.extra_secrets),
            "filename": Path(png_path).name,
            "comment": redact(str(png_path), self.extra_secrets) if self.webhook else "",
        }
        with transaction(self.db) as db:
            oid = self._insert(db, thread.channel, run_id, "upload", payload, data=data)
        self._wake()
        return oid

    def flush_digests(self) -> int:
        """Post the digest of every ended window that held messages back; the sender calls this each loop."""
        now = self.clock()
        window = self.settings.rate_window_s
        rows = self.db.execute(
            "SELECT run_id FROM slack_rate WHERE dropped > 0 AND window_start + ? <= ?", (window, now)
        ).fetchall()
        n = 0
        for row in rows:
            thread = self.thread(str(row[0]))
            if thread is None:
                continue
            with transaction(self.db) as db:
                n += self._roll_window(db, thread, now)
        if n:
            self._wake()
        return n

    def silenced(self, run_id: str, rule: str | None = None) -> bool:
        thread = self.thread(run_id)
        return self.silences.covers(run_id, thread.run_name if thread else None, rule)

    def thread(self, run_id: str) -> Thread | None:
        row = self.db.execute(
            "SELECT run_id, run_name, channel, level, ts FROM slack_threads WHERE run_id = ?", (run_id,)
        ).fetchone()
        return Thread(*row) if row else None

    def resolve_run(self, ref: str) -> str | None:
        """A run id from what a user typed (id, name -> newest, id prefix), for posting into its thread."""
        if self.thread(ref):
            return ref
        row = self.db.execute(
            "SELECT run_id FROM slack_threads WHERE run_name = ? ORDER BY created_at DESC LIMIT 1", (ref,)
        ).fetchone()
        if row is None:
            like = ref.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
            rows = self.db.execute(
                "SELECT run_id FROM slack_threads WHERE run_id LIKE ? ESCAPE '\\' LIMIT 2", (like,)
            ).fetchall()
            row = rows[0] if len(rows) == 1 else None
        return str(row[0]) if row else None

    def pending(self) -> int:
        return outbox_backlog(self.db)[0]

    # -- internals --------------------------------------------------------------------------------

    def _wake(self) -> None:
        if self.on_enqueue is not None:
            self.on_enqueue()

    def _channel(self, channel: str | None) -> str | None:
        if self.webhook:
            return WEBHOOK_CHANNEL
        return self.settings.route(channel)

    def _implicit_thread(self, run_id: str) -> Thread | None:
        """An event for a run never opened (Slack switched on mid-run): its first event opens the thread."""
        chan = self._channel(None)
        if chan is None:
            return None
        with transaction(self.db) as db:
            db.execute(
                "INSERT OR IGNORE INTO slack_threads(run_id, run_name, channel, level, opener_id, created_at)"
                " VALUES (?, ?, ?, ?, NULL, ?)",
                (run_id, run_id, chan, self.settings.level, self.clock()),
            )
        return self.thread(run_id)

    def _insert(
        self,
        db: sqlite3.Connection,
        channel: str,
        run_id: str | None,
        kind: str,
        payload: dict[str, Any],
        data: bytes | None = None,
        in_thread: bool = True,
    ) -> int:
        payload = redact_blocks(payload, self.extra_secrets)
        if run_id is not None and in_thread:
            opener = db.execute("SELECT opener_id FROM slack_threads WHERE run_id = ?", (run_id,)).fetchone()
            if opener is not None and opener[0] is None and "opens" not in payload:
                payload["opens"] = run_id  # first message of an implicit thread
            if "opens" not in payload:
                payload["thread_of"] = run_id
        cur = db.execute(
            "INSERT INTO slack_outbox(channel, run_id, kind, payload, data, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (channel, run_id, kind, json.dumps(payload), data, self.clock()),
        )
        oid = int(cur.lastrowid or 0)
        if payload.get("opens"):
            db.execute(
                "UPDATE slack_threads SET opener_id = ? WHERE run_id = ? AND opener_id IS NULL", (oid, run_id)
            )
        return oid

    def _post_event(
        self,
        db: sqlite3.Connection,
        thread: Thread,
        ev: dict[str, Any],
        now: float,
        dedupe_key: str | None = None,
    ) -> int | None:
        """An event as its own thread message, inside the flood bound unless its kind is unbounded."""
        kind, title, text = str(ev["kind"]), str(ev["title"]), str(ev.get("text") or "")
        key = dedupe_key or hashlib.sha1(f"{kind}\0{title}\0{text}".encode()).hexdigest()
        if kind not in UNBOUNDED_KINDS:
            if self._duplicate(db, thread.run_id, key, now, title) or not self._take_slot(
                db, thread.run_id, title
            ):
                return None
        msg_text, blocks = self._event_blocks(thread, ev)
        oid = self._insert(db, thread.channel, thread.run_id, "post", {"text": msg_text, "blocks": blocks})
        if ev.get("needs_human"):
            self._broadcast(db, thread, title, now)
        return oid

    def _event_blocks(self, thread: Thread, ev: dict[str, Any]) -> tuple[str, list[bk.Block]]:
        return bk.event(
            thread.run_name,
            thread.run_id,
            str(ev["kind"]),
            str(ev["title"]),
            str(ev.get("text") or ""),
            str(ev.get("level") or "info"),
            ev.get("excerpt"),
            bool(ev.get("buttons")),
            self.settings.excerpt_chars,
            ev.get("actor"),
        )

    def _broadcast(self, db: sqlite3.Connection, thread: Thread, title: str, now: float) -> None:
        """The one channel line for a run that needs a human (once per dedupe window)."""
        if not self._duplicate(db, thread.run_id, "__broadcast__", now, None):
            line = {"text": bk.broadcast_line(thread.run_name, title)}
            self._insert(db, thread.channel, thread.run_id, "post", line, in_thread=False)

    # -- incidents (supervisor/slack/incidents.py) -------------------------------------------------

    def _open_incidents(self, db: sqlite3.Connection, run_id: str | None = None) -> list[inc_.Incident]:
        """The open incidents (one per run at most), of one run or of all."""
        sql = (
            "SELECT id, run_id, opened_at, flush_at, headline, message_id, events, pending, last_update_at,"
            " last_notice_at, recovering_since FROM slack_incidents WHERE resolved_at IS NULL"
        )
        rows = db.execute(sql + " AND run_id = ?", (run_id,)) if run_id is not None else db.execute(sql)
        return [
            inc_.Incident(
                id=int(r[0]),
                run_id=str(r[1]),
                opened_at=float(r[2]),
                flush_at=float(r[3]),
                headline=json.loads(r[4]),
                message_id=r[5],
                events=int(r[6]),
                pending=json.loads(r[7]),
                last_update_at=r[8],
                last_notice_at=r[9],
                recovering_since=r[10],
            )
            for r in rows.fetchall()
        ]

    def _open_incident(self, db: sqlite3.Connection, run_id: str) -> inc_.Incident | None:
        found = self._open_incidents(db, run_id)
        return found[0] if found else None

    def _new_incident(
        self, db: sqlite3.Connection, run_id: str, headline: dict[str, Any], now: float, flush_at: float
    ) -> inc_.Incident:
        cur = db.execute(
            "INSERT INTO slack_incidents(run_id, opened_at, flush_at, headline) VALUES (?, ?, ?, ?)",
            (run_id, now, flush_at, json.dumps(headline)),
        )
        return inc_.Incident(int(cur.lastrowid or 0), run_id, now, flush_at, headline)

    def _save_incident(self, db: sqlite3.Connection, inc: inc_.Incident) -> None:
        db.execute(
            "UPDATE slack_incidents SET headline = ?, message_id = ?, events = ?, pending = ?,"
            " last_update_at = ?, last_notice_at = ?, recovering_since = ? WHERE id = ?",
            (
                json.dumps(inc.headline),
                inc.message_id,
                inc.events,
                json.dumps(inc.pending[-500:]),
                inc.last_update_at,
                inc.last_notice_at,
                inc.recovering_since,
                inc.id,
            ),
        )

    def _post_incident(self, db: sqlite3.Connection, thread: Thread, inc: inc_.Incident, now: float) -> int:
        """The incident's one message: its headline event with everything grouped so far."""
        msg_text, blocks = self._event_blocks(thread, inc.headline)
        related = len(inc.pending)
        blocks = bk.with_related(blocks, inc_.summarize(inc.pending), related)
        if related:
            msg_text = bk.clip(f"{msg_text} (+{related} related)", bk.FALLBACK_MAX)
        oid = self._insert(db, thread.channel, thread.run_id, "post", {"text": msg_text, "blocks": blocks})
        # it counts against the flood bound like any event, but is never the one held back
        db.execute("UPDATE slack_rate SET sent = sent + 1 WHERE run_id = ?", (thread.run_id,))
        if inc.needs_human:
            self._broadcast(db, thread, inc_.label(inc.headline), now)
        inc.message_id = oid
        inc.pending = []
        inc.last_update_at = inc.last_notice_at = now
        self._save_incident(db, inc)
        return oid

    def _post_update(self, db: sqlite3.Connection, thread: Thread, inc: inc_.Incident, now: float) -> None:
        msg_text, blocks = bk.incident_update(
            thread.run_name,
            thread.run_id,
            inc_.label(inc.headline),
            inc_.summarize(inc.pending),
            len(inc.pending),
            inc.events,
        )
        self._insert(db, thread.channel, thread.run_id, "post", {"text": msg_text, "blocks": blocks})
        inc.pending = []
        inc.last_update_at = inc.last_notice_at = now
        self._save_incident(db, inc)

    def _post_repeat(self, db: sqlite3.Connection, thread: Thread, inc: inc_.Incident, now: float) -> None:
        msg_text, blocks = bk.incident_repeat(
            thread.run_name,
            thread.run_id,
            inc_.label(inc.headline),
            inc_.duration(now - inc.opened_at),
            inc.events,
        )
        self._insert(db, thread.channel, thread.run_id, "post", {"text": msg_text, "blocks": blocks})
        inc.last_notice_at = now
        self._save_incident(db, inc)

    def _resolve_incident(
        self, db: sqlite3.Connection, thread: Thread, inc: inc_.Incident, why: str, now: float
    ) -> None:
        if inc.pending:
            self._post_update(db, thread, inc, now)
        msg_text, blocks = bk.incident_resolved(
            thread.run_name,
            thread.run_id,
            inc_.label(inc.headline),
            why,
            inc_.duration(now - inc.opened_at),
            inc.events,
        )
        self._insert(db, thread.channel, thread.run_id, "post", {"text": msg_text, "blocks": blocks})
        db.execute(
            "UPDATE slack_incidents SET resolved_at = ?, resolution = ? WHERE id = ?", (now, why, inc.id)
        )

    def _duplicate(
        self, db: sqlite3.Connection, run_id: str, key: str, now: float, title: str | None
    ) -> bool:
        row = db.execute(
            "SELECT last_at FROM slack_dedupe WHERE run_id = ? AND key = ?", (run_id, key)
        ).fetchone()
        if row is not None and now - float(row[0]) < self.settings.dedupe_window_s:
            if title is not None:
                self._count_dropped(db, run_id, f"{title} (repeat)")
            return True
        db.execute(
            "INSERT INTO slack_dedupe(run_id, key, last_at) VALUES (?, ?, ?)"
            " ON CONFLICT(run_id, key) DO UPDATE SET last_at = excluded.last_at",
            (run_id, key, now),
        )
        return False

    def _count_dropped(self, db: sqlite3.Connection, run_id: str, title: str) -> None:
        row = db.execute("SELECT dropped_titles FROM slack_rate WHERE run_id = ?", (run_id,)).fetchone()
        titles = json.loads(row[0]) if row else []
        if len(titles) < 50:
            titles.append(title)
        db.execute(
            "UPDATE slack_rate SET dropped = dropped + 1, dropped_titles = ? WHERE run_id = ?",
            (json.dumps(titles), run_id),
        )

    def _take_slot(self, db: sqlite3.Connection, run_id: str, title: str) -> bool:
        row = db.execute("SELECT sent FROM slack_rate WHERE run_id = ?", (run_id,)).fetchone()
        if int(row[0]) < self.settings.max_messages_per_run:
            db.execute("UPDATE slack_rate SET sent = sent + 1 WHERE run_id = ?", (run_id,))
            return True
        self._count_dropped(db, run_id, title)
        log.info("slack_flood_bound", run_id=run_id, title=title)
        return False

    def _roll_window(self, db: sqlite3.Connection, thread: Thread, now: float) -> int:
        """Start a new window if the current one ended, posting its digest first. Returns digests queued."""
        row = db.execute(
            "SELECT window_start, dropped, dropped_titles FROM slack_rate WHERE run_id = ?", (thread.run_id,)
        ).fetchone()
        if row is None:
            db.execute(
                "INSERT INTO slack_rate(run_id, window_start, sent) VALUES (?, ?, 0)", (thread.run_id, now)
            )
            return 0
        start, dropped, titles = float(row[0]), int(row[1]), json.loads(row[2])
        if now - start < self.settings.rate_window_s:
            return 0
        queued = 0
        if dropped:
            text, blocks = bk.digest(
                thread.run_name, thread.run_id, dropped, titles, self.settings.rate_window_s
            )
            self._insert(db, thread.channel, thread.run_id, "post", {"text": text, "blocks": blocks})
            queued = 1
        db.execute(
            "UPDATE slack_rate SET window_start = ?, sent = 0, dropped = 0, dropped_titles = '[]'"
            " WHERE run_id = ?",
            (now, thread.run_id),
        )
        return queued


@dataclass(frozen=True, slots=True)
class _Row:
    id: int
    channel: str
    run_id: str | None
    kind: str
    payload: dict[str, Any]
    data: bytes | None
    created_at: float
    attempts: int
    next_try_at: float
    in_flight: bool


class OutboxSender:
    """Background delivery: per channel strictly in id order; a failing head blocks only its channel."""

    def __init__(
        self,
        db: sqlite3.Connection,
        transport: Transport,
        settings: SlackSettings,
        *,
        notifier: Notifier | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.db = db
        self.transport = transport
        self.settings = settings
        self.notifier = notifier
        self.clock = clock
        self.key_prefix = instance_id(db)
        self._event: asyncio.Event | None = None
        self._delivering = asyncio.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None
        if notifier is not None and notifier.on_enqueue is None:
            notifier.on_enqueue = self.wake

    def wake(self) -> None:
        """Safe from any thread; a no-op before `run` starts."""
        loop, event = self._loop, self._event
        if loop is None or event is None:
            return
        if threading.get_ident() == self._loop_thread:
            event.set()
        else:
            loop.call_soon_threadsafe(event.set)

    async def run(self) -> None:
        """Deliver forever (cancel to stop; an interrupted send is resolved on the next start)."""
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self._event = asyncio.Event()
        while True:
            self._event.clear()
            if self.notifier is not None:
                self.notifier.flush_digests()
                self.notifier.flush_incidents()
            sent = await self.deliver_ready()
            if sent:
                continue
            delay = self._next_wakeup()
            try:
                await asyncio.wait_for(self._event.wait(), timeout=delay)
            except TimeoutError:
                pass

    def _next_wakeup(self) -> float:
        row = self.db.execute(
            "SELECT MIN(next_try_at) FROM slack_outbox WHERE sent_at IS NULL AND dead = 0"
        ).fetchone()
        poll = self.settings.poll_interval_s
        if row is None or row[0] is None:
            return poll
        return min(poll, max(0.01, float(row[0]) - self.clock()))

    def _heads(self) -> list[_Row]:
        rows = self.db.execute(
            "SELECT o.id, o.channel, o.run_id, o.kind, o.payload, o.data, o.created_at, o.attempts,"
            " o.next_try_at, o.in_flight FROM slack_outbox o"
            " JOIN (SELECT channel, MIN(id) AS id FROM slack_outbox"
            " WHERE sent_at IS NULL AND dead = 0 GROUP BY channel) h ON o.id = h.id ORDER BY o.id"
        ).fetchall()
        return [
            _Row(
                id=int(r[0]),
                channel=str(r[1]),
                run_id=r[2],
                kind=str(r[3]),
                payload=json.loads(r[4]),
                data=r[5],
                created_at=float(r[6]),
                attempts=int(r[7]),
                next_try_at=float(r[8]),
                in_flight=bool(r[9]),
            )
            for r in rows
        ]

    async def deliver_ready(self) -> int:
        """One pass: try the head of every channel whose retry time has come. Returns rows delivered."""
        async with self._delivering:  # `drain` (shutdown, tests) may run beside `run`: one row, one send
            now = self.clock()
            sent = 0
            for row in self._heads():
                if row.next_try_at > now:
                    continue
                if await self._deliver(row):
                    sent += 1
            return sent

    async def drain(self, within: float = 10.0) -> None:
        """Deliver until nothing is pending (tests, shutdown); raises TimeoutError if Slack stays away."""
        async with asyncio.timeout(within):
            while True:
                if self.notifier is not None:
                    self.notifier.flush_digests()
                    self.notifier.flush_incidents()
                if not self.db.execute(
                    "SELECT 1 FROM slack_outbox WHERE sent_at IS NULL AND dead = 0 LIMIT 1"
                ).fetchone():
                    return
                if not await self.deliver_ready():
                    await asyncio.sleep(min(0.05, self._next_wakeup()))

    def _thread_ts(self, row: _Row) -> str | None:
        run_id = row.payload.get("thread_of")
        if not run_id or not self.transport.threads:
            return None
        r = self.db.execute("SELECT ts FROM slack_threads WHERE run_id = ?", (run_id,)).fetchone()
        return str(r[0]) if r and r[0] else None  # opener dead/never sent: post at top level

    async def _deliver(self, row: _Row) -> bool:
        key = f"{self.key_prefix}:{row.id}"
        thread_ts = self._thread_ts(row)
        try:
            if row.in_flight and row.kind == "post":
                found = await self.transport.find_sent(row.channel, thread_ts, key, row.created_at - 5)
                if found:
                    log.info("slack_outbox_recovered", id=row.id)
                    self._mark_sent(row, found)
                    return True
            with transaction(self.db) as db:
                db.execute(
                    "UPDATE slack_outbox SET in_flight = 1, attempts = attempts + 1 WHERE id = ?", (row.id,)
                )
            if row.kind == "upload":
                p = row.payload
                result = await self.transport.upload(
                    row.channel, thread_ts, row.data or b"", p["filename"], p["title"], p.get("comment", "")
                )
            elif row.kind == "update":
                result = await self._edit(row, key)
            else:
                result = await self.transport.post(row.channel, row.payload, thread_ts, key)
        except DeliveryError as err:
            self._failed(row, err)
            return False
        except Exception as exc:  # transports classify; this is a last resort
            self._failed(row, classify(exc))
            return False
        self._mark_sent(row, result.ts)
        return True

    async def _edit(self, row: _Row, key: str) -> PostResult:
        """Edit the run's first message; where it cannot be (webhooks, or it never went out), say the same in
        a message of its own (its last block: the link)."""
        r = self.db.execute(
            "SELECT ts FROM slack_threads WHERE run_id = ?", (row.payload["edits"],)
        ).fetchone()
        ts = str(r[0]) if r and r[0] else None
        if ts is not None and self.transport.threads:
            return await self.transport.update(row.channel, ts, row.payload)
        last = (row.payload.get("blocks") or [{}])[-1]
        line = {"text": str((last.get("elements") or [{}])[0].get("text", "")), "blocks": [last]}
        return await self.transport.post(row.channel, line, None, key)

    def _mark_sent(self, row: _Row, ts: str | None) -> None:
        with transaction(self.db) as db:
            db.execute(
                "UPDATE slack_outbox SET sent_at = ?, result_ts = ?, in_flight = 0, last_error = NULL"
                " WHERE id = ?",
                (self.clock(), ts, row.id),
            )
            if row.payload.get("opens") and ts and self.transport.threads:
                db.execute("UPDATE slack_threads SET ts = ? WHERE run_id = ?", (ts, row.payload["opens"]))

    def _failed(self, row: _Row, err: DeliveryError) -> None:
        err.reason = redact(err.reason)  # an aiohttp error can quote the webhook URL
        now = self.clock()
        attempts = row.attempts + 1
        backoff = min(self.settings.retry_initial_s * 2 ** min(attempts - 1, 20), self.settings.retry_max_s)
        backoff *= random.uniform(0.9, 1.1)
        in_flight = 1 if isinstance(err, Retry) and err.uncertain else 0
        dead = 0
        if isinstance(err, Retry):
            delay = err.after if err.after is not None else backoff
            if err.after is not None:
                attempts = row.attempts  # a 429 is Slack pacing us, not a failure of this message
        elif isinstance(err, Blocked):
            delay = self.settings.retry_max_s
            log.error("slack_blocked", id=row.id, channel=row.channel, reason=err.reason)
        else:
            assert isinstance(err, Permanent)
            delay = backoff
            if row.payload.get("blocks") and attempts < MAX_PERMANENT_ATTEMPTS:
                row.payload.pop("blocks")  # Slack refused the layout: the fallback text still says it
                self._store_payload(row)
            elif attempts >= MAX_PERMANENT_ATTEMPTS or not row.payload.get("blocks"):
                dead = 1
            log.error("slack_rejected", id=row.id, channel=row.channel, reason=err.reason, dead=bool(dead))
        log.info("slack_retry", id=row.id, reason=err.reason, delay=round(delay, 2))
        with transaction(self.db) as db:
            db.execute(
                "UPDATE slack_outbox SET attempts = ?, next_try_at = ?, in_flight = ?, last_error = ?,"
                " dead = ?"
                " WHERE id = ?",
                (attempts, now + delay, in_flight, err.reason[:500], dead, row.id),
            )

    def _store_payload(self, row: _Row) -> None:
        with transaction(self.db) as db:
            db.execute("UPDATE slack_outbox SET payload = ? WHERE id = ?", (json.dumps(row.payload), row.id))
