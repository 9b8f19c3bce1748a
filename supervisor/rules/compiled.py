"""Rules compiled once for every run's matcher: regexes (in RE2, linear time: `regex.py`), prefilter
literals (Hyperscan or gated `bytes.find`), and the priority order in which rules own an event."""

from __future__ import annotations

import heapq
import importlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import structlog

from supervisor.rules.literals import derive_literals
from supervisor.rules.loader import DEFAULT_RULES_PATH, RulesError, load_rules_file, load_ruleset_rules
from supervisor.rules.model import (
    Defer,
    LogTrigger,
    MetricTrigger,
    MissingTrigger,
    PendingTrigger,
    Rule,
    StalledTrigger,
    StateTrigger,
)
from supervisor.rules.regex import Pattern, compile_regex
from supervisor.rules.state import TRACEBACK_MARK
from supervisor.rules.stepd import STEPD_CANCEL_RE, STEPD_LITERALS, STEPD_OOM_RE

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class CompiledLog:
    regex: Pattern  # RE2, `^`/`$` at every line; matched on UTF-8 bytes
    exclude: Pattern | None
    sources: tuple[str, ...]
    literals: tuple[str, ...] | None  # None: no prefilter possible, always run the regex
    source_pattern: str = ""  # the regex as written in the rules file
    defer: Defer | None = None  # held while the launcher retries its bring-up (model.Defer)


@dataclass(frozen=True, slots=True)
class CompiledRule:
    rule: Rule
    order: int
    logs: tuple[CompiledLog, ...]
    states: tuple[StateTrigger, ...]
    state_reasons: tuple[Pattern | None, ...]
    pending: tuple[tuple[PendingTrigger, Pattern], ...]
    stalled: tuple[StalledTrigger, ...]
    missing: tuple[MissingTrigger, ...]
    metrics: tuple[MetricTrigger, ...]

    @property
    def name(self) -> str:
        return self.rule.name

    @property
    def priority(self) -> int:
        return self.rule.priority


@dataclass(slots=True)
class RuleSet:
    """Rules compiled once (regexes, prefilter literals, priority order); shared by every run's matcher."""

    rules: tuple[CompiledRule, ...]
    incident_window_s: float = 600.0
    by_name: dict[str, CompiledRule] = field(default_factory=dict)
    literals: tuple[str, ...] = ()
    unfiltered: tuple[CompiledRule, ...] = ()  # rules with a log regex that has no prefilter
    literal_bytes: tuple[bytes, ...] = ()
    _gates: tuple[tuple[bytes, tuple[tuple[bytes, int], ...]], ...] | None = None
    _per_source: dict[str, tuple[CompiledRule, ...]] = field(default_factory=dict)
    # rules whose regex went over its CPU budget on one event (matcher.py): name -> why; not run again
    quarantined: dict[str, str] = field(default_factory=dict)
    # rules with a `stalled` trigger that learns the run's rhythm (every progress event goes to them)
    learning: tuple[CompiledRule, ...] = ()
    _hs: Any = None
    _hs_tried: bool = False
    # the log regexes of the shipped rules files: only these go into Hyperscan's regex compiler (below)
    trusted_patterns: frozenset[str] = frozenset()
    _hs_regex: Any = None
    _hs_regex_tried: bool = False
    _hs_untrusted: Any = None

    def gates(self) -> tuple[tuple[bytes, tuple[tuple[bytes, int], ...]], ...]:
        """The pure-Python prefilter plan (plan_gates), made on first use: Hyperscan never needs it."""
        if self._gates is None:
            self._gates = plan_gates(self.literal_bytes)
        return self._gates

    def hyperscan_db(self) -> Any:
        """A Hyperscan database of the literals (None when hyperscan is not installed): one pass for all."""
        if not self._hs_tried:
            self._hs_tried = True
            self._hs = _compile_hyperscan(self.literal_bytes)
        return self._hs

    def hyperscan_regex_db(self) -> tuple[Any, Any]:
        """(the shipped rules' log regexes, the slurmstepd patterns and the traceback mark in one Hyperscan
        database; the other rules' prefilter literals in a second one), or (None, None): hyperscan missing,
        or a pattern it cannot compile, and the literal prefilter is used for everything.

        The prefilter that answers the whole match: Hyperscan finds the lines a shipped rule's regex
        matches in one pass (~4x grep's throughput on the default rules, bench/regex_engines.py), choosing
        its own literal factors, so lines holding only a prefilter literal are no longer decoded and
        re-matched. RE2 still decides every match (groups, exclude, multi-line events): Hyperscan only says
        where. Users' regexes never reach Hyperscan's regex compiler: fuzzing found patterns it compiles and
        then crashes on (`(x+x+)+y` with start-of-match reporting segfaulted on scan); their literals
        (Hyperscan's literal API, as before) and RE2 find their lines.
        """
        if not self._hs_regex_tried:
            self._hs_regex_tried = True
            trusted = [lg.source_pattern for r in self.rules for lg in r.logs if self.trusts(lg)]
            trusted += [STEPD_CANCEL_RE.pattern, STEPD_OOM_RE.pattern, re.escape(TRACEBACK_MARK)]
            self._hs_regex = _compile_hyperscan_regexes(trusted)
            lits = sorted(
                {x for r in self.rules for lg in r.logs if not self.trusts(lg) for x in lg.literals or ()}
            )
            if self._hs_regex is not None and lits:
                self._hs_untrusted = _compile_hyperscan([x.encode() for x in lits])
                if self._hs_untrusted is None:
                    self._hs_regex = None
        return self._hs_regex, self._hs_untrusted

    def trusts(self, lg: CompiledLog) -> bool:
        return lg.source_pattern in self.trusted_patterns and byte_mode_superset(lg.source_pattern)

    def inhibits(self, inhibitor: str, target: str) -> bool:
        rule = self.by_name.get(inhibitor)
        return rule is not None and any(
            fnmatchcase(target, pat) for pat in rule.rule.inhibits if pat != inhibitor
        )

    def log_rules_for(self, source: str) -> tuple[CompiledRule, ...]:
        """Rules (priority order) that can fire on a log line of `source`, including slurmstepd-state ones."""
        cached = self._per_source.get(source)
        if cached is None:
            cached = tuple(
                r
                for r in self.rules
                if r.states
                or any(not lg.sources or any(fnmatchcase(source, g) for g in lg.sources) for lg in r.logs)
            )
            self._per_source[source] = cached
        return cached

    def patterns(self) -> list[str]:
        """Every log regex and the slurmstepd patterns: what `grep -E -f` gets in the benchmark."""
        out = [lg.source_pattern for r in self.rules for lg in r.logs]
        out += [STEPD_CANCEL_RE.pattern, STEPD_OOM_RE.pattern]
        return out


def compile_rules(
    rules: Sequence[Rule], incident_window_s: float = 600.0, trusted_patterns: frozenset[str] = frozenset()
) -> RuleSet:
    """`trusted_patterns`: log regexes from the shipped rules files, which may go to Hyperscan's compiler."""
    compiled: list[CompiledRule] = []
    for order, rule in enumerate(rules):
        if not rule.enabled:
            continue
        trig = rule.all_triggers
        logs = []
        for t in trig:
            if isinstance(t, LogTrigger):
                lits = t.literals if t.literals is not None else derive_literals(t.regex)
                logs.append(
                    CompiledLog(
                        regex=compile_regex(t.regex, multiline=True),
                        exclude=compile_regex(t.exclude) if t.exclude else None,
                        sources=tuple(t.sources),
                        literals=tuple(lits) if lits else None,
                        source_pattern=t.regex,
                        defer=t.defer,
                    )
                )
        states = tuple(t for t in trig if isinstance(t, StateTrigger))
        compiled.append(
            CompiledRule(
                rule=rule,
                order=order,
                logs=tuple(logs),
                states=states,
                state_reasons=tuple(compile_regex(s.reason) if s.reason else None for s in states),
                pending=tuple((t, compile_regex(t.reason)) for t in trig if isinstance(t, PendingTrigger)),
                stalled=tuple(t for t in trig if isinstance(t, StalledTrigger)),
                missing=tuple(t for t in trig if isinstance(t, MissingTrigger)),
                metrics=tuple(t for t in trig if isinstance(t, MetricTrigger)),
            )
        )
    compiled.sort(key=lambda r: (-r.priority, r.order))
    all_lits: set[str] = {TRACEBACK_MARK, *STEPD_LITERALS}
    unfiltered = []
    for r in compiled:
        for lg in r.logs:
            if lg.literals is None:
                unfiltered.append(r)
            else:
                all_lits.update(lg.literals)
    # A literal that contains another is redundant for the prefilter: the shorter one already finds the line.
    minimal = sorted(x for x in all_lits if not any(o != x and o in x for o in all_lits))
    return RuleSet(
        rules=tuple(compiled),
        incident_window_s=incident_window_s,
        by_name={r.name: r for r in compiled},
        literals=tuple(minimal),
        literal_bytes=tuple(x.encode() for x in minimal),
        unfiltered=tuple({r.name: r for r in unfiltered}.values()),
        trusted_patterns=trusted_patterns,
        learning=tuple(r for r in compiled if any(t.learn is not None for t in r.stalled)),
    )


_COMMON_TOKENS = (
    b"INFO",
    b"NCCL INFO ",
    b"NCCL",
    b"WARN",
    b"DEBUG",
    b"Warning",
    b" in ",
    b" the ",
    b"node",
    b"ERROR",
)


def plan_gates(literals: Sequence[bytes]) -> tuple[tuple[bytes, tuple[tuple[bytes, int], ...]], ...]:
    """Group literals under shared distinctive substrings so the pure-Python prefilter needs fewer passes.

    Each pass costs a full `bytes.find` scan, so 65 literals cost 65 scans; a substring like ``Error`` shared
    by 15 literals replaces 15 scans with one (plus a cheap `startswith` check at each of its rare hits).
    Gates must look unusual (a capital, a digit or ``_``, >= 4 bytes) and not be common log tokens.
    Greedy set cover, picking the substring that covers most of the remaining literals (then the longest,
    then the greatest); the candidates are listed once and their counts refreshed lazily, since a count only
    falls (re-listing them at every pick cost seconds per rule set once the rules had ~200 literals).
    """
    cands: dict[bytes, set[bytes]] = {}
    for lit in set(literals):
        for n in range(4, min(len(lit), 12) + 1):
            for i in range(len(lit) - n + 1):
                sub = lit[i : i + n]
                if sub in cands:
                    cands[sub].add(lit)
                    continue
                if not any(65 <= c <= 90 or c == 95 or 48 <= c <= 57 for c in sub):
                    continue
                if any(tok in sub or sub in tok for tok in _COMMON_TOKENS):
                    continue
                cands[sub] = {lit}
    remaining = set(literals)
    heap = [(-len(lits), -len(sub), _Desc(sub)) for sub, lits in cands.items()]
    heapq.heapify(heap)
    gates: list[tuple[bytes, tuple[tuple[bytes, int], ...]]] = []
    while heap:
        neg_count, neg_len, desc = heapq.heappop(heap)
        covered = cands[desc.key] & remaining
        if len(covered) != -neg_count:  # stale: some of its literals were covered by an earlier gate
            if covered:
                heapq.heappush(heap, (-len(covered), neg_len, desc))
            continue
        if len(covered) < 2:
            break
        gates.append((desc.key, tuple(sorted((lit, lit.index(desc.key)) for lit in covered))))
        remaining -= covered
    gates.extend((lit, ((lit, 0),)) for lit in sorted(remaining))
    return tuple(gates)


@dataclass(frozen=True, slots=True)
class _Desc:
    """Orders bytes greatest first, so a min-heap breaks ties towards the greatest candidate."""

    key: bytes

    def __lt__(self, other: _Desc) -> bool:
        return self.key > other.key


def _compile_hyperscan(literals: Sequence[bytes]) -> Any:
    try:
        import hyperscan  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return None
    try:
        db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
        db.compile(
            expressions=list(literals), ids=list(range(len(literals))), elements=len(literals), literal=True
        )
    except Exception as exc:  # an old libhs without literal mode: fall back to bytes.find
        log.warning("hyperscan prefilter unavailable", error=str(exc))
        return None
    return db


_sre: Any = importlib.import_module("re._parser")
_c: Any = importlib.import_module("re._constants")
_ANY_CHAR = ("ANY", "NOT_LITERAL")
_NEGATED_CATEGORIES = ("CATEGORY_NOT_SPACE", "CATEGORY_NOT_WORD", "CATEGORY_NOT_DIGIT")


def byte_mode_superset(pattern: str) -> bool:
    r"""Whether Hyperscan in byte mode finds every line RE2 (UTF-8, on decoded text) finds for `pattern`.

    Byte mode needs no UTF-8 validation of each chunk (that alone cost more than the scan): it is exact for
    ASCII literals and classes, and a superset for "any character" atoms (`.`, `\S`, `[^x]`) repeated
    without bound, since a character is one to four non-newline bytes. A single or counted such atom
    (`a.b`, `.{3}`) could miss a multi-byte character: such a pattern is matched via its literals instead.
    """
    try:
        parsed = _sre.parse(pattern)
    except (re.error, RecursionError, OverflowError, ValueError):
        return False
    stack: list[tuple[Any, bool]] = [(list(parsed), False)]
    while stack:
        items, unbounded = stack.pop()
        for op, av in items:
            name = str(op)
            if name == "LITERAL" and av > 127:
                return False
            if name in _ANY_CHAR and not unbounded:
                return False
            if name == "IN":
                negated = any(str(o) == "NEGATE" for o, _ in av)
                wide = any(
                    (str(o) == "LITERAL" and a > 127) or (str(o) == "RANGE" and a[1] > 127) for o, a in av
                )
                not_cat = any(str(o) == "CATEGORY" and str(a) in _NEGATED_CATEGORIES for o, a in av)
                if wide or ((negated or not_cat) and not unbounded):
                    return False
            elif name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
                _lo, hi, sub = av
                stack.append((list(sub), unbounded or hi == _c.MAXREPEAT))
            elif name == "SUBPATTERN":
                stack.append((list(av[3]), unbounded))
            elif name == "ATOMIC_GROUP":
                stack.append((list(av), unbounded))
            elif name == "BRANCH":
                stack.extend((list(b), unbounded) for b in av[1])
            elif name in ("GROUPREF", "GROUPREF_EXISTS", "ASSERT", "ASSERT_NOT"):
                return False
    return True


def _compile_hyperscan_regexes(patterns: Sequence[str]) -> Any:
    try:
        import hyperscan  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return None
    # Byte mode (see byte_mode_superset); no HS_FLAG_SOM_LEFTMOST: a match's end names its line, and SOM is
    # where the crash was.
    flags = hyperscan.HS_FLAG_MULTILINE
    try:
        db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
        db.compile(
            expressions=[p.encode() for p in patterns],
            ids=list(range(len(patterns))),
            elements=len(patterns),
            flags=[flags] * len(patterns),
        )
    except Exception as exc:  # a construct Hyperscan lacks (RE2 has more): the literal prefilter instead
        log.info("hyperscan regex prefilter unavailable; using the literal prefilter", error=str(exc))
        return None
    return db


def load_ruleset(
    paths: Sequence[Path] = (), *, use_default: bool = True, disable: Iterable[str] = ()
) -> RuleSet:
    """Load, merge and compile rules files (raises `RulesError` with located problems)."""
    rules, window = load_ruleset_rules(paths, use_default=use_default, disable=disable)
    return compile_rules(rules, window, shipped_patterns())


def shipped_patterns() -> frozenset[str]:
    """The log regexes of the shipped default rules file (cached by the loader while it is unchanged)."""
    try:
        doc = load_rules_file(DEFAULT_RULES_PATH)
    except RulesError:
        return frozenset()
    return frozenset(t.regex for r in doc.rules for t in r.all_triggers if isinstance(t, LogTrigger))
