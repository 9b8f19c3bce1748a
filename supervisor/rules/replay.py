"""Replay a log file through the rules as the daemon would see it: what `shepherd rules test` and the
rule tests run."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from supervisor.rules.engine import Match, MatcherState, RuleSet, feed_lines, flush, scan_lines

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
