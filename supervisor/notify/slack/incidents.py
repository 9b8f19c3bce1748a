"""Incidents: Alertmanager-style grouping of a run's trouble into one message plus bounded updates.

Pure: the notifier keeps an `Incident` per run in SQLite and asks `next_step` what is due.

* An incident opens with a run's first alert, resume or give-up. Alerts wait `group_wait_s` before the
  incident message goes out, so related events (the NCCL timeouts a dead node causes on every rank) land in
  that one message. The wait ends early when anything else must be said about the run (a resume, an attempt
  submitted): the thread stays in order.
* Later alerts and inhibited child events are folded in: at most one update per `group_interval_s`,
  listing what came since the last message (rule, count, and the parent that suppressed it).
* An incident that needs a human and is still firing is repeated every `repeat_interval_s`.
* It resolves, with a message, when the run completes or ends, when the daemon sees again (its own
  blindness), or when a new attempt has been running for `resolve_after_s` without new trouble.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

# What the daemon's run_state says of a run a person gave up on (`shepherd give-up`, Slack's button): nobody
# is waited for any more, so its incident resolves ("the run is closed").
CLOSED_BY_PERSON = "CLOSED"
# GAVE_UP (by a rule) and FAILED still need a human.
ENDED_RUN_STATES = frozenset({"COMPLETED", "CANCELLED", "LOST", CLOSED_BY_PERSON})

Step = Literal["open", "update", "repeat", "resolve"]


@dataclass(frozen=True, slots=True)
class Timing:
    group_wait_s: float = 10.0
    group_interval_s: float = 60.0
    repeat_interval_s: float = 4 * 3600.0
    resolve_after_s: float = 120.0


@dataclass(slots=True)
class Incident:
    id: int
    run_id: str
    opened_at: float
    flush_at: float
    headline: dict[str, Any]  # the event that opened it (or the decision that replaced a waiting alert)
    message_id: int | None = None  # outbox id of the incident message once queued
    events: int = 1
    pending: list[dict[str, Any]] = field(default_factory=list)  # folded in, not yet shown
    last_update_at: float | None = None
    last_notice_at: float | None = None
    recovering_since: float | None = None

    @property
    def needs_human(self) -> bool:
        return bool(self.headline.get("needs_human")) or any(e.get("needs_human") for e in self.pending)


def next_step(inc: Incident, now: float, timing: Timing, run_state: str | None = None) -> Step | None:
    """What the incident needs now, if anything; the notifier calls this about once a second."""
    if inc.message_id is None:
        ended = run_state in ENDED_RUN_STATES
        return "open" if now >= inc.flush_at or ended else None
    if run_state in ENDED_RUN_STATES:
        return "resolve"
    if inc.recovering_since is not None and now - inc.recovering_since >= timing.resolve_after_s:
        return "resolve"
    if inc.pending and now >= (inc.last_update_at or inc.opened_at) + timing.group_interval_s:
        return "update"
    if (
        inc.needs_human
        and inc.recovering_since is None
        and now >= (inc.last_notice_at or inc.opened_at) + timing.repeat_interval_s
    ):
        return "repeat"
    return None


def entry(
    kind: str,
    title: str,
    *,
    rule: str | None,
    level: str,
    parent: str | None = None,
    needs_human: bool = False,
) -> dict[str, Any]:
    return {
        "kind": kind,
        "title": title,
        "rule": rule,
        "level": level,
        "parent": parent,
        "needs_human": needs_human,
    }


def summarize(entries: Sequence[dict[str, Any]], limit: int = 8) -> list[str]:
    """One line per distinct (rule or title, parent), with a count: 49 NCCL lines are one line, not 49."""
    counts: Counter[tuple[str, str | None]] = Counter()
    for e in entries:
        what = str(e.get("rule") or e.get("title") or e.get("kind") or "event")
        counts[(what, e.get("parent"))] += 1
    lines = []
    for (what, parent), n in counts.most_common(limit):
        times = f" ×{n}" if n > 1 else ""
        lines.append(f"{what}{times}" + (f" (suppressed: caused by {parent})" if parent else ""))
    rest = len(counts) - limit
    if rest > 0:
        lines.append(f"… and {rest} other kind(s)")
    return lines


def label(headline: dict[str, Any], limit: int = 140) -> str:
    """The incident's short name in updates, reminders and the resolution: rule, then the title's start."""
    title = str(headline.get("title") or "")
    rule = headline.get("rule")
    text = title if not rule or title.startswith(str(rule)) else f"{rule}: {title}"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def duration(seconds: float) -> str:
    s = int(max(0, seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"
