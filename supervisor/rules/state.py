"""What the engine remembers per attempt (`MatcherState`, made to survive a restart) and what it returns
(`Match` with its `Evidence`): the rules' results as plain data."""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from typing import Any

from supervisor.domain.jobstate import JobState
from supervisor.rules.model import Action
from supervisor.rules.rhythm import Rhythm

TRACEBACK_MARK = "Traceback (most recent call last):"
_NODE_RES = (
    re.compile(r"\*\*\* (?:JOB|STEP) \S+ ON (\S+) CANCELLED"),
    re.compile(r"Node failure on ([\w.-]+)"),
    re.compile(r"\b[Nn]odes? ([A-Za-z][\w.-]*) (?:not responding|is down|failed|died)"),
    re.compile(r"\bip=(\d{1,3}(?:\.\d{1,3}){3})"),
    re.compile(r"\bIP: (\d{1,3}(?:\.\d{1,3}){3})"),
    re.compile(r"\b(?:hostname|host|node)[=:] ?([A-Za-z][\w.-]*)"),
    re.compile(r"^([A-Za-z][\w.-]*):\d+:\d+ \[\d+\] NCCL", re.M),
)
_REPEATED_RE = re.compile(r"\s*\[repeated \d+x across cluster\]")
_HEX_RE = re.compile(r"0x[0-9a-fA-F]+")
_NUM_RE = re.compile(r"\d+(?:\.\d+)?")
_WS_RE = re.compile(r"\s+")
METRIC_HISTORY = 64  # recent (step, value) pairs kept per tag: the longest window, plus the alert's history
HISTORY_SHOWN = 12  # of them, in an alert's {history}
EXCERPT_CHARS = 300  # an alert's `{excerpt}`: the matched line, or an unrecognised end's decisive line


@dataclass(slots=True)
class Traceback:
    source: str
    prefix: str
    first_line: int
    lines: list[str]
    line_nos: list[int]
    phase: str = "frames"  # frames | after_exc | chain
    blank_pending: int = 0
    evaluated: int = 0
    last_at: float = 0.0


@dataclass(slots=True)
class Incident:
    rule: str
    opened_at: float


@dataclass(slots=True)
class MatcherState:
    """What the engine remembers about one attempt; the daemon keeps one per attempt (and may persist it)."""

    run_id: str = ""
    attempt: int = 0
    job_id: str = ""
    job_state: JobState | None = None
    exit_code: int | None = None
    nodes: str = ""
    running_since: float | None = None
    pending_reason: str = ""
    pending_since: float | None = None
    last_state_key: tuple[str, int | None, str] | None = None
    progress_at: dict[str, float] = field(default_factory=dict)
    progress_value: dict[str, float] = field(default_factory=dict)
    seen_files: set[str] = field(default_factory=set)
    metric_best: dict[str, float] = field(default_factory=dict)  # per metric trigger and tag: its best
    metric_recent: dict[str, list[tuple[int, float]]] = field(default_factory=dict)  # tag -> recent steps
    metric_streak: dict[str, tuple[int, int]] = field(default_factory=dict)  # trigger key -> (steps, first)
    metric_fired: set[str] = field(default_factory=set)  # trigger keys that fired in their current stretch
    fired: dict[str, float] = field(default_factory=dict)  # rule -> when it last fired (or was absorbed)
    timer_fired: set[str] = field(default_factory=set)  # once-per-stretch keys for pending/stalled/missing
    incident: Incident | None = None
    tracebacks: dict[str, list[Traceback]] = field(default_factory=dict)
    rhythms: dict[str, Rhythm] = field(default_factory=dict)  # per learning stalled trigger: the run's rhythm
    # rule -> its first match held while the launcher retried its bring-up (model.Defer): source, line,
    # lines, reason, signature key, node and the file whose absence held it
    held: dict[str, dict[str, Any]] = field(default_factory=dict)

    def copy(self) -> MatcherState:
        return copy.deepcopy(self)

    def to_dict(self) -> dict[str, Any]:
        """The durable part: what must survive a daemon restart so nothing fires twice."""
        return {
            "run_id": self.run_id,
            "attempt": self.attempt,
            "job_id": self.job_id,
            "job_state": self.job_state.value if self.job_state else None,
            "exit_code": self.exit_code,
            "nodes": self.nodes,
            "running_since": self.running_since,
            "pending_reason": self.pending_reason,
            "pending_since": self.pending_since,
            "last_state_key": list(self.last_state_key) if self.last_state_key else None,
            "progress_at": dict(self.progress_at),
            "progress_value": dict(self.progress_value),
            "seen_files": sorted(self.seen_files),
            "metric_best": dict(self.metric_best),
            "metric_recent": {k: [list(p) for p in v] for k, v in self.metric_recent.items()},
            "metric_streak": {k: list(v) for k, v in self.metric_streak.items()},
            "metric_fired": sorted(self.metric_fired),
            "fired": dict(self.fired),
            "timer_fired": sorted(self.timer_fired),
            "incident": [self.incident.rule, self.incident.opened_at] if self.incident else None,
            "rhythms": self.rhythms_dict(),
            "held": {k: dict(v) for k, v in self.held.items()},
        }

    def rhythms_dict(self) -> dict[str, Any]:
        """What the stalled triggers learnt about the run (the daemon keeps it per run, across attempts)."""
        return {k: r.to_dict() for k, r in self.rhythms.items()}

    @staticmethod
    def rhythms_from(d: Any) -> dict[str, Rhythm]:
        return (
            {str(k): Rhythm.from_dict(v) for k, v in d.items() if isinstance(v, dict)}
            if isinstance(d, dict)
            else {}
        )

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> MatcherState:
        key = d.get("last_state_key")
        inc = d.get("incident")
        return cls(
            run_id=str(d.get("run_id", "")),
            attempt=int(d.get("attempt", 0)),
            job_id=str(d.get("job_id", "")),
            job_state=JobState(d["job_state"]) if d.get("job_state") else None,
            exit_code=d.get("exit_code"),
            nodes=str(d.get("nodes", "")),
            running_since=d.get("running_since"),
            pending_reason=str(d.get("pending_reason", "")),
            pending_since=d.get("pending_since"),
            last_state_key=(str(key[0]), key[1], str(key[2])) if key else None,
            progress_at=dict(d.get("progress_at", {})),
            progress_value=dict(d.get("progress_value", {})),
            seen_files=set(d.get("seen_files", [])),
            metric_best=dict(d.get("metric_best", {})),
            metric_recent={
                str(k): [(int(p[0]), float(p[1])) for p in v] for k, v in d.get("metric_recent", {}).items()
            },
            metric_streak={str(k): (int(v[0]), int(v[1])) for k, v in d.get("metric_streak", {}).items()},
            metric_fired=set(d.get("metric_fired", [])),
            fired=dict(d.get("fired", {})),
            timer_fired=set(d.get("timer_fired", [])),
            incident=Incident(str(inc[0]), float(inc[1])) if inc else None,
            rhythms=cls.rhythms_from(d.get("rhythms")),
            held={str(k): dict(v) for k, v in (d.get("held") or {}).items() if isinstance(v, dict)},
        )


@dataclass(frozen=True, slots=True)
class Evidence:
    """What made a rule fire: the lines (with where they are) or the observed state."""

    source: str = ""
    first_line: int = 0
    lines: tuple[str, ...] = ()
    match_line: int = 0  # line number of the line holding the match (0: not a log match)
    line_numbers: tuple[int, ...] = ()  # of each line, when not consecutive (interleaved ranks)
    state: str | None = None
    reason: str = ""
    at: float = 0.0  # when the rule saw it (a line read, a state polled, a timer run out)
    since: float | None = None  # when the condition began, for timers (the last progress of a stall)
    metric: str = ""  # a metric match: Shepherd's name of the scalar (its recent values are `lines`)
    step: int | None = None  # a metric match: the first step of the stretch that fired (where it went bad)
    phase: str = ""  # a stall: the phase the run was silent in
    bound_s: float | None = None  # a stall: the silence it was held to (learnt, or the fixed `for`)
    expected_s: float | None = None  # a stall: the phase's learnt p99 silence (None: not learnt yet)


@dataclass(frozen=True, slots=True)
class Match:
    rule: str
    run_id: str
    attempt: int
    priority: int
    category: str
    actions: tuple[Action, ...]
    evidence: Evidence
    signature: str
    reason: str
    node: str | None = None
    retryable: bool = True
    deterministic: bool = False
    max_retries: int | None = None
    same_signature_limit: int | None = None  # the rule's own "give up on the Nth time in a row"
    supersedes: tuple[str, ...] = ()
    followup_of: str | None = None  # set: part of an incident already decided; record it, do not act
    inhibited_by: str | None = None

    @property
    def followup(self) -> bool:
        return self.followup_of is not None

    @property
    def line(self) -> int:
        return self.evidence.match_line or self.evidence.first_line

    @property
    def action_names(self) -> tuple[str, ...]:
        return tuple(a.kind for a in self.actions)

    @property
    def excludes_node(self) -> bool:
        """Whether the match's resume excludes the failing node from the next attempts."""
        return any(a.resume is not None and a.resume.exclude_node for a in self.actions)

    @property
    def fault_node(self) -> str | None:
        """The node this failure is pinned on when the match's resume excludes it (decide/policy.py counts
        such faults apart: the next attempt runs elsewhere); an address is no node name."""
        if self.node and not looks_like_ip(self.node) and self.excludes_node:
            return self.node
        return None

    @property
    def excerpt(self) -> str:
        """The line that matched (the observed state, what the metric did), short enough for an alert."""
        ev = self.evidence
        if ev.metric:
            return ev.reason[:EXCERPT_CHARS]
        if ev.lines:
            nos = ev.line_numbers or tuple(range(ev.first_line, ev.first_line + len(ev.lines)))
            idx = nos.index(ev.match_line) if ev.match_line in nos and len(ev.lines) == len(nos) else -1
            return ev.lines[idx].strip()[:EXCERPT_CHARS]
        return ", ".join(x for x in (ev.state or "", ev.reason) if x)[:EXCERPT_CHARS]

    def template_context(self, job_id: str = "", spec: dict[str, str] | None = None) -> dict[str, str]:
        """Values for alert messages and env patches (`{run}`, `{excerpt}`, `{spec.shared_cache_dir}`...)."""
        ctx = {
            "run": self.run_id,
            "rule": self.rule,
            "reason": self.reason,
            "excerpt": self.excerpt,
            "attempt": str(self.attempt),
            "job_id": job_id,
            "node": self.node or "unknown node",
            "state": self.evidence.state or "",
            "description": self.reason.split(": ", 1)[0],
            "signature": self.signature,
            "metric": self.evidence.metric,
            "step": "" if self.evidence.step is None else str(self.evidence.step),
            "history": "; ".join(x.strip() for x in self.evidence.lines[-HISTORY_SHOWN:])
            if self.evidence.metric
            else "",
        }
        ctx.update({f"spec.{k}": v for k, v in (spec or {}).items()})
        return ctx


def normalise_signature(text: str) -> str:
    """A stable key for "the same failure again": numbers, addresses and whitespace don't count."""
    s = _REPEATED_RE.sub("", text)
    s = _HEX_RE.sub("0x_", s)
    s = _NUM_RE.sub("N", s)
    return _WS_RE.sub(" ", s).strip()[:160]


def looks_like_ip(name: str) -> bool:
    """Ray's `ip=` names an address; sbatch --exclude wants a node name."""
    parts = name.split(".")
    return len(parts) == 4 and all(p.isdigit() for p in parts)


def find_node(text: str, nodes: str = "") -> str | None:
    """The failing node when the evidence names it; else the job's node when it ran on one node only."""
    for rx in _NODE_RES:
        m = rx.search(text)
        if m:
            return m.group(1)
    if nodes and not any(c in nodes for c in "[],") and nodes.strip():
        return nodes.strip()
    return None
