"""Where a notice about a run goes and in what form: pure functions over the notice, the run's routing
settings and its open incident, so Slack's message plan is tested without SQLite or Slack."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from supervisor.domain.notices import LEVELS
from supervisor.domain.spec import NotifySpec

GROUPED_KINDS = frozenset({"alert", "related"})  # folded into the run's open incident
ACTING_KINDS = frozenset({"resumed", "gave_up"})  # a decision: always shown, opens an incident if none
RESOLVE_NOW_KINDS = frozenset({"completed", "recovered"})
RESOLVE_STABLE_KINDS = frozenset({"started"})  # resolves once the attempt has stayed up for a while
# Said once per run or per human action: never level-filtered, silenced or flood-bounded.
UNBOUNDED_KINDS = frozenset({"opened", "completed", "gave_up", "command", "digest"})


@dataclass(frozen=True, slots=True)
class ThreadTarget:
    """A run's own routing: its channel and level (None: the operator's Slack settings decide)."""

    channel: str | None = None
    level: str | None = None


def thread_target(notify: NotifySpec | None) -> ThreadTarget:
    """The spec's `notify` as routing: its channel, and its level when it is not the default "info" (so the
    default leaves the operator's `slack.level` in force)."""
    if notify is None:
        return ThreadTarget()
    return ThreadTarget(notify.slack_channel, notify.level if notify.level != "info" else None)


def held_back(kind: str, level: str, thread_level: str, *, silenced: bool) -> str | None:
    """Why a notice is not posted at all (below the thread's level, or silenced), or None."""
    if kind in UNBOUNDED_KINDS:
        return None
    if LEVELS.get(level, 20) < LEVELS.get(thread_level, 20):
        return "below the thread's level"
    if silenced:
        return "silenced"
    return None


@dataclass(frozen=True, slots=True)
class IncidentView:
    """What routing needs to know of the run's open incident: whether its message went out yet."""

    posted: bool


@dataclass(frozen=True, slots=True)
class Route:
    """The message plan for one notice.

    - fold: into the open incident (shown in its next update);
    - open_incident: a new incident, posted now only when there is no group wait;
    - headline: a decision becomes the incident's message (a new incident, or the waiting one promoted);
    - post: its own message; `flush_waiting` posts a waiting incident first so the thread stays in order,
      then `after` tells what it does to the open incident (count an action, resolve, start recovering).
    """

    kind: Literal["fold", "open_incident", "headline", "post"]
    post_now: bool = False
    promote: bool = False
    flush_waiting: bool = False
    after: Literal["count", "resolve", "recovering"] | None = None


def route(kind: str, incident: IncidentView | None, *, group_wait_s: float) -> Route:
    """How a notice of `kind` is shown, given the run's open incident (None: none is open)."""
    if kind in GROUPED_KINDS:
        if incident is None:
            return Route("open_incident", post_now=group_wait_s <= 0)
        return Route("fold")
    if kind in ACTING_KINDS and (incident is None or not incident.posted):
        return Route("headline", post_now=True, promote=incident is not None)
    if incident is None:
        return Route("post")
    after: Literal["count", "resolve", "recovering"] | None = None
    if kind in ACTING_KINDS:
        after = "count"
    elif kind in RESOLVE_NOW_KINDS:
        after = "resolve"
    elif kind in RESOLVE_STABLE_KINDS:
        after = "recovering"
    return Route("post", flush_waiting=not incident.posted, after=after)
