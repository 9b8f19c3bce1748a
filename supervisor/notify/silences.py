"""Silences hold back a run's or a rule's alerts for a while (the rules still act); the CLI, Slack and
`status` all read and write them here."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass

from supervisor.store import transaction

RULE_PREFIX = "rule:"


@dataclass(frozen=True, slots=True)
class Silence:
    target: str  # a run id, a run name, or rule:NAME
    until: float
    actor: str


def targets(run_id: str, run_name: str | None = None, rule: str | None = None) -> list[str]:
    """What a silence may name to cover an alert of `run_id` (its id, its name) raised by `rule`."""
    return [run_id, *([run_name] if run_name else []), *([f"{RULE_PREFIX}{rule}"] if rule else [])]


class Silences:
    def __init__(self, db: sqlite3.Connection, *, clock: Callable[[], float] = time.time) -> None:
        self.db = db
        self.clock = clock

    def add(self, target: str, seconds: float, actor: str) -> float:
        """Silence `target` until now + seconds (replacing an earlier silence of it); returns the end time."""
        now = self.clock()
        until = now + seconds
        with transaction(self.db) as db:
            db.execute(
                "INSERT INTO slack_silences(target, until, actor, created_at) VALUES (?, ?, ?, ?)"
                " ON CONFLICT(target) DO UPDATE SET until = excluded.until, actor = excluded.actor",
                (target, until, actor, now),
            )
        return until

    def remove(self, target: str) -> None:
        with transaction(self.db) as db:
            db.execute("DELETE FROM slack_silences WHERE target = ?", (target,))

    def active(self, now: float | None = None) -> list[Silence]:
        now = self.clock() if now is None else now
        rows = self.db.execute(
            "SELECT target, until, actor FROM slack_silences WHERE until > ? ORDER BY until", (now,)
        ).fetchall()
        return [Silence(str(r[0]), float(r[1]), str(r[2])) for r in rows]

    def covers(self, run_id: str, run_name: str | None = None, rule: str | None = None) -> bool:
        names = targets(run_id, run_name, rule)
        marks = ",".join("?" * len(names))
        row = self.db.execute(
            f"SELECT 1 FROM slack_silences WHERE target IN ({marks}) AND until > ?", (*names, self.clock())
        ).fetchone()
        return row is not None
