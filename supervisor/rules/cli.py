"""`shepherd rules check` and `shepherd rules test`: how users write and debug rules.

Plain functions (paths in, text out, exit code back); the lead's CLI wires them to argparse.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TextIO

from supervisor.rules.engine import Match, MatcherState, RuleSet, feed_lines, flush, load_ruleset, scan_lines
from supervisor.rules.loader import DEFAULT_RULES_PATH, RulesError, check_files

# Stand-in for supervisor.watch.lines until it lands: ANSI codes (also a bare "[36m" whose ESC was lost)
# and Ray's "(Actor pid=..., ip=...)" prefixes.
_ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|(?<![\w\]])\[(?:\d{1,3};)*\d{1,3}m")
_RAY_PREFIX_RE = re.compile(r"^(?:\((?:[^()]|\([^()]*\))*?pid=\d+[^)]*\)\s?)+")


def normalise_line(raw: str) -> str:
    """One physical log line -> clean text (the daemon's tailer does the same before the engine sees it)."""
    line = _ANSI_RE.sub("", raw.rstrip("\n"))
    return _RAY_PREFIX_RE.sub("", line).rstrip()


def read_log_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, clean line) for a log file; invalid UTF-8 is replaced, never fatal."""
    with path.open("rb") as fh:
        for no, raw in enumerate(fh, start=1):
            yield no, normalise_line(raw.decode("utf-8", errors="replace"))


def _chunks(path: Path, size: int = 8 << 20) -> Iterator[bytes]:
    """Whole lines, a few MB at a time (what the tailer hands over)."""
    with path.open("rb") as fh:
        rest = b""
        while data := fh.read(size):
            data = rest + data
            cut = data.rfind(b"\n") + 1
            if cut:
                rest = data[cut:]
                yield data[:cut]
            else:
                rest = data
        if rest:
            yield rest + b"\n"


def replay(rs: RuleSet, path: Path) -> list[Match]:
    """Everything the rules say about a log file, as if the daemon had tailed it.

    The one place that turns raw log bytes into clean lines: the watcher's normaliser when it is there,
    the minimal stand-in above otherwise.
    """
    st = MatcherState(run_id=path.name)
    try:
        from supervisor.watch.lines import normalise_chunk
    except ImportError:
        out = feed_lines(rs, st, path.name, read_log_lines(path))
        return out + flush(rs, st)
    out = []
    line_no = 1
    for chunk in _chunks(path):
        batch = normalise_chunk(chunk, line_no)
        out += scan_lines(rs, st, batch.texts, path.name, line_no, prefixes=batch.prefixes)
        line_no += len(batch.texts)
    return out + flush(rs, st)


def rules_check(paths: Sequence[Path], out: TextIO) -> int:
    """Print `file:line: field: reason` for every problem; 0 when all files are fine."""
    files = list(paths) or [DEFAULT_RULES_PATH]
    errors = check_files(files)
    for err in errors:
        print(str(err), file=out)
    if not errors:
        print(f"ok: {', '.join(str(p) for p in files)}", file=out)
    return 1 if errors else 0


def rules_test(log_path: Path, rule_paths: Sequence[Path], as_json: bool, out: TextIO) -> int:
    """Replay a log file through the rules; print what would fire. Exit 2: bad rules or no log."""
    try:
        rs = load_ruleset(rule_paths, use_default=not rule_paths)
    except RulesError as exc:
        for err in exc.errors:
            print(str(err), file=out)
        return 2
    if not log_path.is_file():
        print(f"{log_path}: no such file", file=out)
        return 2
    matches = replay(rs, log_path)
    if as_json:
        rows = [
            {
                "rule": m.rule,
                "action": ",".join(m.action_names),
                "line": m.line,
                "supersedes": list(m.supersedes),
                "signature": m.signature,
            }
            for m in matches
            if not m.followup
        ]
        print(json.dumps(rows), file=out)
        return 0
    if not matches:
        print(f"{log_path}: no rule fires", file=out)
    for m in matches:
        ev = m.evidence
        lines = f"{ev.first_line}-{ev.first_line + len(ev.lines) - 1}" if len(ev.lines) > 1 else f"{m.line}"
        if m.followup:
            print(f"  ~ {m.rule}  line {lines}  (part of the {m.followup_of} incident, no action)", file=out)
            continue
        extra = f"  supersedes {', '.join(m.supersedes)}" if m.supersedes else ""
        node = f"  node {m.node}" if m.node else ""
        print(f"{m.rule}  line {lines}  -> {', '.join(m.action_names)}{node}{extra}", file=out)
        print(f"    {m.reason[:200]}", file=out)
    return 0
