"""The pure rules engine: events and one attempt's matcher state in, matches out.

The engine never touches files or Slurm. The daemon keeps one `MatcherState`
per attempt, feeds it every event (or whole chunks of log text through
`scan_text`/`scan_lines`, which is what keeps ingest near grep speed) and acts
on the returned `Match` values. Design points, each from real failure logs:

* a Python traceback (with Ray's ``RayTaskError(X)`` wrapper, chained
  exceptions, vLLM's ``EngineDeadError``) is ONE event, because the exception
  type is usually only on its last line or inside the wrapper;
* one event maps to one rule, the highest priority one (an ECC error inside an
  NCCL watchdog message is a hardware error);
* one incident maps to one decision: a rule fires once per attempt within the
  incident window; a later, more important rule (or one that inhibits the
  first) *supersedes* it; lesser ones are returned as follow-ups (evidence only,
  no actions);
* ``state`` rules also match what slurmstepd writes into the job's output file,
  so replaying a log file shows time limits, preemptions and oom-kills.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from fnmatch import fnmatchcase
from time import thread_time
from typing import Any

import structlog

from supervisor.domain.jobstate import JobState
from supervisor.domain.observations import Event, LogEvent, MetricEvent, ProgressEvent, StateEvent, Tick
from supervisor.rules.compiled import CompiledLog, CompiledRule, RuleSet
from supervisor.rules.model import MetricTrigger
from supervisor.rules.regex import compile_regex
from supervisor.rules.rhythm import Rhythm
from supervisor.rules.state import (
    HISTORY_SHOWN,
    METRIC_HISTORY,
    TRACEBACK_MARK,
    Evidence,
    Incident,
    Match,
    MatcherState,
    Traceback,
    find_node,
    normalise_signature,
)
from supervisor.rules.stepd import stepd_state

log = structlog.get_logger(__name__)

_CHAIN_MARKS = (
    "During handling of the above exception, another exception occurred:",
    "The above exception was the direct cause of the following exception:",
)
MAX_TRACEBACK_LINES = 400
# A traceback is matched as one text by every rule each time an exception line completes it: its size bounds
# that work (400 lines of 64 KiB each would be 25 MiB per rule per evaluation).
MAX_TRACEBACK_CHARS = 256 * 1024
MAX_EVIDENCE_LINES = 60
MAX_EVIDENCE_LINE_CHARS = 2000
MAX_HELD_LINES = 20  # of a held match's evidence (it is persisted with the matcher state)
# RE2 matches in linear time, but the constant depends on the pattern: a counted repeat of a class after a
# common character (`a[ab]{200}x`) defeats its DFA cache and runs at ~100 KB/s. A rule whose regex spends
# more CPU than this on one event (a line, a traceback, a 256 KiB slice of a chunk) is quarantined: logged
# as an error with the reason and not run again by this rule set (a reload brings it back, fixed or not).
REGEX_CPU_BUDGET_S = 0.1
UNFILTERED_SLICE = 256 * 1024
TRACEBACK_IDLE_S = 2.0
# What may stand in front of "Traceback" and in front of each of its lines: stacked Ray/rank/host prefixes.
# In RE2: under Python's re the `[rank1]:` alternatives overlapped and `[rank1]:` x 30 + `!` took minutes.
_PREFIX_RE = compile_regex(r"(?:(?:\[[\w .-]+\]:|[\w.-]+:|\([^()]*(?:\([^()]*\)[^()]*)*\))\s*)+")


def _emit(
    rs: RuleSet,
    st: MatcherState,
    cr: CompiledRule,
    at: float,
    evidence: Evidence,
    sig_key: str,
    reason: str,
    node: str | None,
) -> list[Match]:
    window = rs.incident_window_s
    rule = cr.rule
    last = st.fired.get(rule.name)
    if last is not None and at - last < window:
        return []  # the same incident again (a repeated line, another rank): already decided
    base: dict[str, Any] = {
        "rule": rule.name,
        "run_id": st.run_id,
        "attempt": st.attempt,
        "priority": rule.priority,
        "category": rule.category,
        "evidence": evidence,
        "signature": f"{rule.name}:{normalise_signature(sig_key)}",
        "reason": reason,
        "node": node,
        "retryable": rule.retryable,
        "deterministic": rule.deterministic,
        "max_retries": rule.max_retries,
        "same_signature_limit": rule.same_signature_limit,
    }
    st.fired[rule.name] = at
    for other, t in st.fired.items():
        if other != rule.name and at - t < window and rs.inhibits(other, rule.name):
            return [Match(actions=(), followup_of=other, inhibited_by=other, **base)]
    inc = st.incident
    if inc is not None and at - inc.opened_at < window and inc.rule in rs.by_name:
        primary = rs.by_name[inc.rule]
        if rule.priority > primary.priority or rs.inhibits(rule.name, primary.name):
            st.incident = Incident(rule.name, inc.opened_at)
            return [Match(actions=tuple(rule.actions), supersedes=(primary.name,), **base)]
        return [Match(actions=(), followup_of=primary.name, **base)]
    st.incident = Incident(rule.name, at)
    return [Match(actions=tuple(rule.actions), **base)]


def _conditions_ok(cr: CompiledRule, st: MatcherState, at: float) -> bool:
    c = cr.rule.conditions
    if c is None:
        return True
    # Unknown (never observed) state passes: a replayed log file has no Slurm state; the lines speak.
    if c.job_states is not None and st.job_state is not None and st.job_state not in c.job_states:
        return False
    if (
        c.min_running_s is not None
        and st.running_since is not None
        and at - st.running_since < c.min_running_s
    ):
        return False
    return not (c.min_attempt is not None and st.attempt < c.min_attempt)


def _deferred(lg: CompiledLog, st: MatcherState, source: str) -> bool:
    """Whether a match of `lg` in `source` is the launcher's own retry business for now (model.Defer)."""
    d = lg.defer
    if d is None or d.until_file in st.seen_files:
        return False
    return not d.sources or any(fnmatchcase(source, g) for g in d.sources)


def _hold(
    st: MatcherState, cr: CompiledRule, lg: CompiledLog, ev: Evidence, key: str, reason: str, node: str | None
) -> None:
    """Keep a rule's first deferred match: the decision if the job then ends FAILED without a give-up line."""
    assert lg.defer is not None
    if cr.name in st.held:
        return
    st.held[cr.name] = {
        "source": ev.source,
        "first_line": ev.first_line,
        "match_line": ev.match_line,
        "lines": list(ev.lines[:MAX_HELD_LINES]),
        "reason": reason,
        "key": key,
        "node": node,
        "until_file": lg.defer.until_file,
        "at": ev.at,
    }


def _release_held(rs: RuleSet, st: MatcherState, ev: StateEvent) -> list[Match]:
    """The job ended FAILED during a bring-up its launcher was retrying, without the launcher's give-up
    line: what each rule held becomes its decision, saying so. A bring-up that went on to start the driver
    (the held file appeared) leaves nothing to decide."""
    out: list[Match] = []
    held, st.held = st.held, {}
    if ev.state != JobState.FAILED:
        return out
    for name, h in held.items():
        cr = rs.by_name.get(name)
        if cr is None or h.get("until_file") in st.seen_files or not _conditions_ok(cr, st, ev.at):
            continue
        evd = Evidence(
            source=str(h.get("source", "")),
            first_line=int(h.get("first_line", 0)),
            lines=tuple(str(x) for x in h.get("lines", ())),
            match_line=int(h.get("match_line", 0)),
            state=ev.state.value,
            reason="held while the launcher retried",
            at=ev.at,
        )
        reason = (
            f"{h.get('reason', name)} (held while the launcher retried its Ray bring-up; "
            f"the job then ended {_state_reason(st)} before the driver started)"
        )
        node = h.get("node")
        out += _emit(
            rs, st, cr, ev.at, evd, str(h.get("key", "")), reason, node if isinstance(node, str) else None
        )
    return out


def _eval_log_event(
    rs: RuleSet,
    st: MatcherState,
    source: str,
    first_line: int,
    lines: Sequence[str],
    at: float,
    line_nos: Sequence[int] | None = None,
) -> list[Match]:
    """One log event (a line or a grouped traceback) -> at most one rule, the highest priority one."""
    text = lines[0] if len(lines) == 1 else "\n".join(lines)
    pseudo = stepd_state(text) if len(lines) == 1 else None
    data: bytes | None = None  # the text as UTF-8, made once: RE2 works on bytes
    for cr in rs.log_rules_for(source):
        for lg in cr.logs:
            if lg.sources and not any(fnmatchcase(source, g) for g in lg.sources):
                continue
            if lg.literals is not None and not any(lit in text for lit in lg.literals):
                continue
            if cr.name in rs.quarantined:
                break
            if data is None:
                data = text.encode("utf-8", "surrogatepass")
            t0 = thread_time()
            found = _first_match(lg, data)
            _charge(rs, cr, source, len(data), thread_time() - t0)
            if found is not None:
                if not _conditions_ok(cr, st, at):
                    continue
                m, holder_b = found
                holder = holder_b.decode("utf-8", "surrogatepass")
                idx = data.count(b"\n", 0, m.start())
                contiguous = line_nos is None or line_nos[-1] - line_nos[0] == len(line_nos) - 1
                ev = Evidence(
                    source=source,
                    first_line=first_line,
                    lines=_cap(lines),
                    match_line=line_nos[idx] if line_nos is not None else first_line + idx,
                    line_numbers=() if contiguous or line_nos is None else tuple(line_nos),
                    state=st.job_state.value if st.job_state else None,
                    at=at,
                )
                g = cr.rule.signature_group
                try:
                    key_b = m.group(g) if g is not None else m.group(0)
                except IndexError:  # a group the regex does not have: fall back to the whole match
                    key_b = m.group(0)
                key = (key_b or m.group(0)).decode("utf-8", "surrogatepass")
                reason = f"{cr.rule.description or cr.name}: {holder.strip()[:300]}"
                node = find_node(text, st.nodes)
                if _deferred(lg, st, source):
                    _hold(st, cr, lg, ev, key, reason, node)
                    return []  # the launcher is still retrying: its give-up, the job's end or a stall decide
                return _emit(rs, st, cr, at, ev, key, reason, node)
        if pseudo is not None and cr.states:
            pstate, pnode = pseudo
            for t, rx in zip(cr.states, cr.state_reasons, strict=True):
                if pstate in t.states and t.exit_codes is None and rx is None and _conditions_ok(cr, st, at):
                    ev = Evidence(
                        source=source,
                        first_line=first_line,
                        lines=_cap(lines),
                        match_line=first_line,
                        state=pstate.value,
                        reason="written by slurmstepd",
                        at=at,
                    )
                    reason = f"{cr.rule.description or cr.name}: {text.strip()[:300]}"
                    return _emit(rs, st, cr, at, ev, pstate.value, reason, pnode or find_node(text, st.nodes))
    return []


def _first_match(lg: CompiledLog, data: bytes) -> tuple[Any, bytes] | None:
    """The first match of `lg` whose line `exclude` does not veto, with that line; None if there is none.

    After a vetoed match the search resumes past its line: the veto holds for every match in that line, and
    resuming right after the match would run `exclude` again over the same line once per match (quadratic
    in a long line full of matches).
    """
    pos = 0
    n = len(data)
    while pos <= n:
        m = lg.regex.search(data, pos)
        if m is None:
            return None
        ls = data.rfind(b"\n", 0, m.start()) + 1
        le = data.find(b"\n", m.end())
        le = n if le < 0 else le
        holder = data[ls:le]
        if lg.exclude is None or lg.exclude.search(holder) is None:
            return m, holder
        pos = le + 1
    return None


def _charge(rs: RuleSet, cr: CompiledRule, source: str, size: int, spent: float) -> None:
    """Quarantine `cr` if its regex went over `REGEX_CPU_BUDGET_S` on `size` bytes of one event."""
    if spent <= REGEX_CPU_BUDGET_S or cr.name in rs.quarantined:
        return
    why = (
        f"its regex used {spent:.2f} s of CPU on {size} bytes of {source} (budget {REGEX_CPU_BUDGET_S} s); "
        "RE2 runs it in linear time, but counted repeats of character classes make that slow: simplify it"
    )
    rs.quarantined[cr.name] = why
    log.error("rule quarantined: it is no longer matched", rule=cr.name, reason=why)


def _cap(lines: Sequence[str]) -> tuple[str, ...]:
    """Evidence as kept (decision rows, notices, Slack): at most `MAX_EVIDENCE_LINES` lines, each clipped to
    `MAX_EVIDENCE_LINE_CHARS`, so a log of 64 KiB lines cannot make every notice megabytes to store, log
    and redact."""
    if len(lines) > MAX_EVIDENCE_LINES:
        lines = [
            *lines[:10],
            f"... {len(lines) - MAX_EVIDENCE_LINES} lines ...",
            *lines[-(MAX_EVIDENCE_LINES - 10) :],
        ]
    return tuple(
        ln if len(ln) <= MAX_EVIDENCE_LINE_CHARS else f"{ln[:MAX_EVIDENCE_LINE_CHARS]}…[{len(ln)} chars]"
        for ln in lines
    )


def _tb_eval(rs: RuleSet, st: MatcherState, tb: Traceback) -> list[Match]:
    if tb.evaluated == len(tb.lines):
        return []
    tb.evaluated = len(tb.lines)
    return _eval_log_event(rs, st, tb.source, tb.first_line, tb.lines, tb.last_at, tb.line_nos)


_NOT_MINE, _CONSUMED, _CLOSED = 0, 1, 2


def _tb_feed(tb: Traceback, line: str, line_no: int, at: float) -> tuple[int, bool]:
    """Offer a line to an open traceback: (verdict, whether an exception line just completed a block)."""
    if tb.prefix:
        if not line.startswith(tb.prefix):
            return _NOT_MINE, False
        body = line[len(tb.prefix) :]
    else:
        body = line
    stripped = body.strip()
    indented = body[:1] in (" ", "\t")
    if len(tb.lines) >= MAX_TRACEBACK_LINES or sum(map(len, tb.lines)) + len(line) > MAX_TRACEBACK_CHARS:
        return _CLOSED, False
    if TRACEBACK_MARK in body or stripped in _CHAIN_MARKS:
        tb.lines.extend([""] * tb.blank_pending)
        tb.line_nos.extend(range(line_no - tb.blank_pending, line_no))
        tb.blank_pending = 0
        tb.lines.append(line)
        tb.line_nos.append(line_no)
        tb.phase = "frames" if TRACEBACK_MARK in body else "chain"
        tb.last_at = at
        return _CONSUMED, False
    if tb.phase == "frames":
        if indented or not stripped:
            tb.lines.append(line)
            tb.line_nos.append(line_no)
            tb.last_at = at
            return _CONSUMED, False
        tb.lines.append(line)  # the exception line (e.g. RayTaskError(OutOfMemoryError): ray::X ...)
        tb.line_nos.append(line_no)
        tb.phase = "after_exc"
        tb.last_at = at
        return _CONSUMED, True
    # after the exception line (or a chain marker): Ray's wrapped form continues with frames, chains continue
    if not stripped:
        tb.blank_pending += 1
        return (_CONSUMED, False) if tb.blank_pending <= 2 else (_CLOSED, False)
    if tb.blank_pending == 0 and indented and stripped.startswith('File "'):
        tb.lines.append(line)
        tb.line_nos.append(line_no)
        tb.phase = "frames"
        tb.last_at = at
        return _CONSUMED, False
    return _CLOSED, False


def _line(rs: RuleSet, st: MatcherState, source: str, line_no: int, text: str, at: float) -> list[Match]:
    """One clean line: extend/close an open traceback, open a new one, or evaluate it as its own event."""
    out: list[Match] = []
    tbs = st.tracebacks.get(source)
    if tbs:
        for tb in sorted(tbs, key=lambda t: -len(t.prefix)):
            verdict, exc_done = _tb_feed(tb, text, line_no, at)
            if verdict == _CONSUMED:
                if exc_done:
                    out += _tb_eval(rs, st, tb)  # decide as soon as the exception line is in: latency matters
                return out
            if verdict == _CLOSED:
                out += _tb_eval(rs, st, tb)
                tbs.remove(tb)
                break
        if not tbs:
            del st.tracebacks[source]
    idx = text.find(TRACEBACK_MARK)
    if idx >= 0:
        head = text[:idx]
        prefix = head if head and _PREFIX_RE.fullmatch(head) else ""
        if head and not prefix:
            # text spliced in front of the traceback (a progress bar, a watchdog message) still counts
            out += _eval_log_event(rs, st, source, line_no, (head,), at)
        st.tracebacks.setdefault(source, []).append(
            Traceback(
                source=source,
                prefix=prefix,
                first_line=line_no,
                lines=[text[len(head) - len(prefix) :]],
                line_nos=[line_no],
                last_at=at,
            )
        )
        return out
    out += _eval_log_event(rs, st, source, line_no, (text,), at)
    return out


def _segments(line: str) -> list[str]:
    """A physical line with `\\r` redraws: each non-empty segment is its own text (the newest counts too)."""
    if "\r" not in line:
        return [line]
    return [s for s in line.split("\r") if s.strip()]


def feed_lines(
    rs: RuleSet, st: MatcherState, source: str, lines: Iterable[tuple[int, str]], at: float = 0.0
) -> list[Match]:
    """Feed clean lines one by one (line number, text); traceback grouping happens here."""
    out: list[Match] = []
    for no, line in lines:
        for seg in _segments(line):
            if st.tracebacks.get(source) or _prefilter_hit(rs, seg):
                out += _line(rs, st, source, no, seg, at)
    return out


def _prefilter_hit(rs: RuleSet, text: str) -> bool:
    if rs.unfiltered:
        return True
    return any(lit in text for lit in rs.literals)


def _hits_python(rs: RuleSet, data: bytes) -> list[int]:
    """One `bytes.find` pass per gate (C speed), verified with `startswith`; one hit per line is enough."""
    hits: list[int] = []
    find = data.find
    starts = data.startswith
    for gate, members in rs.gates():
        i = find(gate)
        while i >= 0:
            if any(i >= off and starts(lit, i - off) for lit, off in members):
                hits.append(i)
                i = find(b"\n", i)
                if i < 0:
                    break
            else:
                i += 1
            i = find(gate, i)
    return hits


def _hits_hyperscan(rs: RuleSet, data: bytes) -> list[int]:
    """All literals in one pass (Hyperscan's multi-literal matcher), when it is installed."""
    hits: list[int] = []

    def on_match(_id: int, _frm: int, to: int, _flags: int, _ctx: object) -> None:
        hits.append(to - 1)

    rs.hyperscan_db().scan(data, match_event_handler=on_match)
    return hits


def _hits_hyperscan_regex(db: Any, data: bytes) -> list[int]:
    """Where a shipped rule's regex (or the traceback mark, or slurmstepd) matches: the last byte of each
    match, which lies in the line the match ends on."""
    hits: list[int] = []

    def on_match(_id: int, _frm: int, to: int, _flags: int, _ctx: object) -> None:
        hits.append(max(0, to - 1))

    db.scan(data, match_event_handler=on_match)
    return hits


def candidate_positions(rs: RuleSet, data: bytes, *, use_hyperscan: bool | None = None) -> list[int]:
    """Byte offsets inside lines that may match some rule (every other line cannot), sorted."""
    if use_hyperscan is not False:
        db, untrusted = rs.hyperscan_regex_db()
        if db is not None:
            hits = _hits_hyperscan_regex(db, data)
            if untrusted is not None:
                untrusted.scan(data, match_event_handler=lambda _i, _f, to, _fl, _c: hits.append(to - 1))
            for r in rs.unfiltered:
                for lg in r.logs:
                    if lg.literals is None and not rs.trusts(lg) and r.name not in rs.quarantined:
                        hits.extend(_unfiltered_hits(rs, r, lg, data))
            hits.sort()
            return hits
    use_hs = rs.hyperscan_db() is not None if use_hyperscan is None else use_hyperscan
    hits = _hits_hyperscan(rs, data) if use_hs else _hits_python(rs, data)
    for r in rs.unfiltered:
        for lg in r.logs:
            if lg.literals is None and r.name not in rs.quarantined:
                hits.extend(_unfiltered_hits(rs, r, lg, data))
    hits.sort()
    return hits


def _unfiltered_hits(rs: RuleSet, cr: CompiledRule, lg: CompiledLog, data: bytes) -> list[int]:
    """Where a regex without prefilter literals matches, searched in line-aligned slices so that its CPU
    budget is checked between slices rather than after a whole multi-megabyte chunk."""
    hits: list[int] = []
    start, n = 0, len(data)
    while start < n and cr.name not in rs.quarantined:
        end = data.find(b"\n", min(n, start + UNFILTERED_SLICE))
        end = n if end < 0 else end + 1
        t0 = thread_time()
        pos = start
        while pos < end:  # one hit per line is all the caller needs: not one Python object per match
            m = lg.regex.search(data, pos, end)
            if m is None:
                break
            hits.append(m.start())
            nl = data.find(b"\n", m.end() if m.end() > m.start() else m.start())
            pos = end if nl < 0 else nl + 1
        _charge(rs, cr, "a chunk", end - start, thread_time() - t0)
        start = end
    return hits


def _decode(b: bytes) -> str:
    return b.decode("utf-8", errors="replace")


def scan_text(
    rs: RuleSet,
    st: MatcherState,
    text: str | bytes,
    source: str,
    first_line_no: int = 1,
    at: float = 0.0,
    *,
    use_hyperscan: bool | None = None,
) -> list[Match]:
    """Match a chunk of complete lines (str, or raw UTF-8 bytes straight from the file); mutates `st`.

    The fast path: the prefilter literals are searched over the whole chunk at C speed; only lines holding
    one are decoded and matched; inside an open traceback lines are taken one by one.
    """
    data = text.encode("utf-8", errors="surrogatepass") if isinstance(text, str) else text
    return _scan(rs, st, data, source, first_line_no, at, use_hyperscan, lambda _i, raw: _decode(raw))


def scan_lines(
    rs: RuleSet,
    st: MatcherState,
    texts: Sequence[str],
    source: str,
    first_line_no: int = 1,
    at: float = 0.0,
    *,
    prefixes: Mapping[int, str] | None = None,
    use_hyperscan: bool | None = None,
) -> list[Match]:
    """Match already normalised lines (e.g. a `supervisor.watch.lines.LineBatch`: texts + stripped prefixes).

    A stripped Ray/rank prefix is put back in front of the lines that get matched, so interleaved ranks'
    tracebacks stay apart and `ip=` can name the node to exclude.
    """
    pre = prefixes or {}
    data = "\n".join(texts).encode("utf-8", errors="surrogatepass")

    def get(i: int, raw: bytes) -> str:
        p = pre.get(i)
        return f"{p} {texts[i]}" if p else texts[i]

    return _scan(rs, st, data, source, first_line_no, at, use_hyperscan, get)


def _scan(
    rs: RuleSet,
    st: MatcherState,
    data: bytes,
    source: str,
    first_line_no: int,
    at: float,
    use_hyperscan: bool | None,
    get_line: Callable[[int, bytes], str],
) -> list[Match]:
    out: list[Match] = []
    n = len(data)
    find = data.find
    hits = candidate_positions(rs, data, use_hyperscan=use_hyperscan)
    pos = 0  # start of the first line not yet processed
    line_no = first_line_no  # the line number at `pos`

    def step_sequential(pos: int, line_no: int) -> tuple[int, int, list[Match]]:
        """Process lines one by one while a traceback is open for this source."""
        res: list[Match] = []
        while pos < n and st.tracebacks.get(source):
            end = find(b"\n", pos)
            if end < 0:
                end = n
            for seg in _segments(get_line(line_no - first_line_no, data[pos:end])):
                res += _line(rs, st, source, line_no, seg, at)
            pos = end + 1
            line_no += 1
        return pos, line_no, res

    if st.tracebacks.get(source):
        pos, line_no, got = step_sequential(pos, line_no)
        out += got
    for h in hits:
        if h < pos:
            continue
        # `pos` starts a line: a hit on that very line has no newline between them (rfind gives -1).
        nl = data.rfind(b"\n", pos, h)
        start = nl + 1 if nl >= 0 else pos
        line_no += data.count(b"\n", pos, start)
        end = find(b"\n", h)
        if end < 0:
            end = n
        for seg in _segments(get_line(line_no - first_line_no, data[start:end])):
            out += _line(rs, st, source, line_no, seg, at)
        pos = end + 1
        line_no += 1
        if st.tracebacks.get(source):
            pos, line_no, got = step_sequential(pos, line_no)
            out += got
    return out


def flush(rs: RuleSet, st: MatcherState, at: float | None = None, *, idle_s: float = 0.0) -> list[Match]:
    """Close open tracebacks (all of them, or those idle for `idle_s`) and evaluate them."""
    out: list[Match] = []
    for source in list(st.tracebacks):
        keep = []
        for tb in st.tracebacks[source]:
            if at is None or at - tb.last_at >= idle_s:
                out += _tb_eval(rs, st, tb)
            else:
                keep.append(tb)
        if keep:
            st.tracebacks[source] = keep
        else:
            del st.tracebacks[source]
    return out


def note_files(st: MatcherState, names: Iterable[str]) -> None:
    """Tell the matcher which files exist in the attempt's log dir (for `missing` triggers)."""
    st.seen_files.update(names)


def _state_reason(st: MatcherState) -> str:
    bits = [st.job_state.value if st.job_state else "?"]
    if st.exit_code is not None:
        bits.append(f"exit code {st.exit_code}")
    if st.pending_reason and st.job_state == JobState.PENDING:
        bits.append(f"reason {st.pending_reason}")
    return ", ".join(bits)


def _on_state(rs: RuleSet, st: MatcherState, ev: StateEvent) -> list[Match]:
    st.run_id = st.run_id or ev.run_id
    st.job_id = ev.job_id or st.job_id
    st.job_state = ev.state
    st.exit_code = ev.exit_code
    if ev.nodes:
        st.nodes = ev.nodes
    if ev.state == JobState.RUNNING and st.running_since is None:
        st.running_since = ev.at
        for cr in rs.learning:
            for i, stt in enumerate(cr.stalled):
                rh = _rhythm(st, cr, i)
                if stt.learn is not None and rh.attempt != st.attempt:
                    rh.begin(st.attempt, ev.at)  # start-up again; what earlier attempts taught stays
    if ev.state == JobState.PENDING:
        if ev.reason != st.pending_reason or st.pending_since is None:
            st.pending_reason = ev.reason
            st.pending_since = ev.at
            st.timer_fired = {k for k in st.timer_fired if not k.startswith("pending:")}
    key = (ev.state.value, ev.exit_code, ev.reason)
    out: list[Match] = []
    if key != st.last_state_key:
        st.last_state_key = key
        for cr in rs.rules:
            hit = False
            for t, rx in zip(cr.states, cr.state_reasons, strict=True):
                if ev.state not in t.states:
                    continue
                if t.exit_codes is not None and ev.exit_code not in t.exit_codes:
                    continue
                if rx is not None and not rx.search(ev.reason):
                    continue
                hit = True
                break
            if hit and _conditions_ok(cr, st, ev.at):
                evd = Evidence(state=ev.state.value, reason=ev.reason, at=ev.at)
                sig = f"{ev.state.value}:{ev.exit_code}"
                reason = f"{cr.rule.description or cr.name}: {_state_reason(st)}"
                out += _emit(rs, st, cr, ev.at, evd, sig, reason, find_node("", st.nodes))
                break  # one observation, one rule
    if ev.state.is_terminal and st.held:
        out += _release_held(rs, st, ev)
    out += _timers(rs, st, ev.at)
    return out


def _rhythm(st: MatcherState, cr: CompiledRule, i: int) -> Rhythm:
    """The rhythm a learning stalled trigger keeps (created on first use, or seeded by the daemon)."""
    return st.rhythms.setdefault(f"{cr.name}#{i}", Rhythm())


def _on_progress(rs: RuleSet, st: MatcherState, ev: ProgressEvent) -> None:
    prev = st.progress_value.get(ev.key)
    moved = prev is None or ev.value != prev
    if moved:
        st.progress_value[ev.key] = ev.value
        st.progress_at[ev.key] = ev.at
    for cr in rs.learning:
        for i, t in enumerate(cr.stalled):
            if t.learn is not None and ev.key in t.keys:
                moved = _rhythm(st, cr, i).observe(st.attempt, ev.key, ev.value, ev.detail, ev.at) or moved
    if moved:
        st.timer_fired = {k for k in st.timer_fired if not k.startswith("stalled:")}


def _record(st: MatcherState, ev: MetricEvent) -> list[tuple[int, float]]:
    """The tag's recent (step, value) pairs with this event in; a step seen again replaces its value, and an
    earlier step (the trainer rewrote its history on a resume) drops what came after it."""
    hist = st.metric_recent.setdefault(ev.tag, [])
    if hist and ev.step <= hist[-1][0]:
        rewound = ev.step < hist[-1][0]
        hist[:] = [p for p in hist if p[0] < ev.step]
        if rewound:  # bests and stretches were measured on the discarded steps
            for key in [k for k in st.metric_streak if k.endswith(f"|{ev.tag}")]:
                del st.metric_streak[key]
            st.metric_fired = {k for k in st.metric_fired if not k.endswith(f"|{ev.tag}")}
            for key in [k for k in st.metric_best if k.endswith(f"|{ev.tag}")]:
                del st.metric_best[key]
    hist.append((ev.step, ev.value))
    del hist[:-METRIC_HISTORY]
    return hist


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values and all(math.isfinite(v) for v in values) else None


def _median(values: Sequence[float]) -> float:
    xs = sorted(values)
    mid = len(xs) // 2
    return xs[mid] if len(xs) % 2 else (xs[mid - 1] + xs[mid]) / 2


def metric_condition(
    t: MetricTrigger, values: Sequence[float], best: float | None
) -> tuple[bool, str, float | None]:
    """Whether `t`'s condition holds at the newest of `values` (oldest first), what it saw, and the windowed
    value to count towards the best. Pure: the matcher keeps the history, the streaks and the bests."""
    v = values[-1]
    if t.condition == "nan":
        return (not math.isfinite(v)), f"= {v}", None
    if t.condition == "spike":
        prev = [x for x in values[-t.window - 1 : -1] if math.isfinite(x)]
        if len(prev) < t.window or not math.isfinite(v):
            return False, "", None
        med = _median(prev)
        hit = v > t.threshold * med if t.threshold is not None and med > 0 else False
        hit = hit and (t.floor is None or v > t.floor)
        ratio = v / med if med > 0 else math.inf
        return hit, f"= {v:.4g}, {ratio:.1f}x the median {med:.4g} of the {t.window} steps before", None
    if len(values) < t.window:
        return False, "", None
    cur = _mean(values[-t.window :])
    if cur is None or t.threshold is None:
        return False, "", None
    over = f" (mean of {t.window} steps)" if t.window > 1 else ""
    if t.condition in ("<", ">"):
        # `floor` arms the threshold once the metric's best has been on the healthy side of it: "pinned at
        # the max" means it was not pinned before (a task whose answers always use the whole budget is not).
        armed = t.floor is None or (
            best is not None and (best >= t.floor if t.higher_is_better else best <= t.floor)
        )
        beyond = cur < t.threshold if t.condition == "<" else cur > t.threshold
        return armed and beyond, f"= {cur:.4g}{over} {t.condition} {t.threshold:g}", cur
    if best is None:
        return False, "", cur
    if t.condition == "drop_from_best":
        drop = (best - cur) if t.higher_is_better else (cur - best)
        return drop >= t.threshold, f"= {cur:.4g}{over}, {drop:.4g} from its best {best:.4g}", cur
    # below_fraction_of_best
    if t.higher_is_better:
        armed = best > 0 and (t.floor is None or best >= t.floor)
        hit = armed and cur < t.threshold * best
    else:
        armed = best > 0 and (t.floor is None or best <= t.floor)
        hit = armed and cur > best / t.threshold
    return hit, f"= {cur:.4g}{over}, {cur / best if best else 0:.0%} of its best {best:.4g}", cur


def _on_metric(rs: RuleSet, st: MatcherState, ev: MetricEvent) -> list[Match]:
    hist = _record(st, ev)
    values = [v for _, v in hist]
    # A scalar logged before this attempt started RUNNING is history, not news: a resumed attempt reads the
    # metrics file its predecessor left (the NaN that ended it, steps after its checkpoint) until the trainer
    # rewrites it. It counts towards windows and bests, never towards a stretch. (Times are the trainer's
    # clock against the daemon's: the resubmission in between dwarfs any skew.)
    fresh = st.running_since is None or ev.at >= st.running_since
    out: list[Match] = []
    for cr in rs.rules:
        for i, t in enumerate(cr.metrics):
            if ev.step < t.min_step or not (t.tag == ev.tag or fnmatchcase(ev.tag, t.tag)):
                continue
            key = f"{cr.name}:{i}|{ev.tag}"
            best = st.metric_best.get(key)
            hit, what, windowed = metric_condition(t, values, best)
            if windowed is not None and (best is None or (windowed > best) == t.higher_is_better):
                st.metric_best[key] = windowed
            if not fresh:
                continue
            if not hit:
                st.metric_streak.pop(key, None)
                st.metric_fired.discard(key)
                continue
            n, first = st.metric_streak.get(key, (0, ev.step))
            st.metric_streak[key] = (n + 1, first)
            if n + 1 < t.for_steps or key in st.metric_fired or not _conditions_ok(cr, st, ev.at):
                continue
            st.metric_fired.add(key)
            span = f" for {n + 1} steps since step {first}" if n + 1 > 1 else ""
            shown = f"{ev.tag} {what} at step {ev.step}{span}"
            evd = Evidence(
                lines=tuple(f"step {s}: {ev.tag} = {v:.6g}" for s, v in hist[-HISTORY_SHOWN:]),
                state=st.job_state.value if st.job_state else None,
                reason=shown,
                at=ev.at,
                metric=ev.tag,
                step=first,
            )
            out += _emit(
                rs, st, cr, ev.at, evd, f"metric:{t.condition}", f"{cr.rule.description}: {shown}", None
            )
            break
    return out


def _timers(rs: RuleSet, st: MatcherState, now: float) -> list[Match]:
    """Duration-based triggers: pending too long, no progress, an expected file missing."""
    out: list[Match] = []
    for cr in rs.rules:
        for pt, rx in cr.pending:
            key = f"pending:{cr.name}"
            if (
                st.job_state == JobState.PENDING
                and st.pending_since is not None
                and key not in st.timer_fired
                and rx.search(st.pending_reason)
                and now - st.pending_since >= pt.for_s
            ):
                st.timer_fired.add(key)
                evd = Evidence(state="PENDING", reason=st.pending_reason, at=now)
                mins = (now - st.pending_since) / 60
                what = f"pending for {mins:.0f} min, reason {st.pending_reason}"
                reason = f"{cr.rule.description or cr.name}: {what}"
                out += _emit(rs, st, cr, now, evd, st.pending_reason, reason, None)
        if st.job_state != JobState.RUNNING or st.running_since is None:
            continue
        for i, stt in enumerate(cr.stalled):
            key = f"stalled:{cr.name}"
            if stt.learn is not None:
                if key not in st.timer_fired:
                    out += _learnt_stall(rs, st, cr, i, now)
                continue
            last = max([st.running_since, *(st.progress_at[k] for k in stt.keys if k in st.progress_at)])
            if key not in st.timer_fired and now - last >= stt.for_s:
                st.timer_fired.add(key)
                evd = Evidence(state="RUNNING", reason=f"no progress since {last:.0f}", at=now, since=last)
                shown = ", ".join(f"{k}={st.progress_value[k]:g}" for k in stt.keys if k in st.progress_value)
                reason = f"{cr.rule.description or cr.name}: no progress for {(now - last) / 60:.0f} min" + (
                    f" (last {shown})" if shown else ""
                )
                out += _emit(rs, st, cr, now, evd, "stalled", reason, find_node("", st.nodes))
        for mt in cr.missing:
            key = f"missing:{cr.name}:{mt.file}"
            if (
                key not in st.timer_fired
                and mt.file not in st.seen_files
                and now - st.running_since >= mt.after_s
            ):
                st.timer_fired.add(key)
                evd = Evidence(state="RUNNING", reason=f"{mt.file} missing", at=now, since=st.running_since)
                reason = (
                    f"{cr.rule.description or cr.name}: {mt.file} not written "
                    f"{(now - st.running_since) / 60:.0f} min after the job started"
                )
                out += _emit(rs, st, cr, now, evd, f"missing:{mt.file}", reason, None)
    return out


def _learnt_stall(rs: RuleSet, st: MatcherState, cr: CompiledRule, i: int, now: float) -> list[Match]:
    """A learning stalled trigger: the silence in the current phase against that phase's bound."""
    t = cr.stalled[i]
    assert t.learn is not None and st.running_since is not None
    rh = _rhythm(st, cr, i)
    if rh.attempt != st.attempt:
        rh.begin(st.attempt, st.running_since)
    v = rh.verdict(now, t.for_s, t.learn.learning())
    if not v.stalled:
        return []
    st.timer_fired.add(f"stalled:{cr.name}")
    evd = Evidence(
        state="RUNNING",
        reason=f"no progress since {v.since:.0f}",
        at=now,
        since=v.since,
        phase=v.phase,
        bound_s=v.bound_s,
        expected_s=v.expected_s,
    )
    shown = ", ".join(f"{k}={st.progress_value[k]:g}" for k in t.keys if k in st.progress_value)
    reason = f"{cr.rule.description or cr.name}: {v.describe()}" + (f" (last {shown})" if shown else "")
    return _emit(rs, st, cr, now, evd, f"stalled:{v.phase}", reason, find_node("", st.nodes))


def feed(rs: RuleSet, st: MatcherState, event: Event) -> list[Match]:
    """Apply one event to `st` (mutated) and return what fired."""
    if isinstance(event, LogEvent):
        st.run_id = st.run_id or event.run_id
        if len(event.lines) == 1:
            return feed_lines(rs, st, event.source, [(event.first_line, event.lines[0])], event.at)
        return _eval_log_event(rs, st, event.source, event.first_line, event.lines, event.at)
    if isinstance(event, StateEvent):
        return _on_state(rs, st, event)
    if isinstance(event, ProgressEvent):
        _on_progress(rs, st, event)
        return _timers(rs, st, event.at)
    if isinstance(event, MetricEvent):
        return _on_metric(rs, st, event) + _timers(rs, st, event.at)
    if isinstance(event, Tick):
        return flush(rs, st, event.at, idle_s=TRACEBACK_IDLE_S) + _timers(rs, st, event.at)
    raise TypeError(f"not an event: {event!r}")


def evaluate(rs: RuleSet, state: MatcherState, event: Event) -> tuple[MatcherState, list[Match]]:
    """The pure form: the old state is left untouched."""
    new = state.copy()
    return new, feed(rs, new, event)
