"""Replay log text through the rules exactly as the daemon sees it (the production normaliser,
watch/lines.py, then the engine): what `shepherd rules test` and every rule test run."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

from supervisor.rules.engine import Match, MatcherState, RuleSet, flush, scan_lines
from supervisor.watch.lines import normalise_chunk, normalise_text


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


def owner(matches: Sequence[Match]) -> str | None:
    """The rule that owns the incident in the end: the last decision, after supersessions (None: no rule)."""
    decided = [m for m in matches if not m.followup]
    return decided[-1].rule if decided else None


def replay(rs: RuleSet, path: Path, source: str | None = None) -> list[Match]:
    """Everything the rules say about a log file, as if the daemon had tailed it under the name `source`
    (default: the file's own; rules' `sources` globs are matched against it)."""
    name = source or path.name
    st = MatcherState(run_id=name)
    out = []
    line_no = 1
    for chunk in _chunks(path):
        batch = normalise_chunk(chunk, line_no)
        out += scan_lines(rs, st, batch.texts, name, line_no, prefixes=batch.prefixes)
        line_no += len(batch.texts)
    return out + flush(rs, st)


def replay_text(
    rs: RuleSet, text: str, source: str = "ray-driver.log", st: MatcherState | None = None
) -> list[Match]:
    """The same for text in memory (tests, pasted logs); open tracebacks are closed at the end."""
    st = st if st is not None else MatcherState(run_id="replay", attempt=1)
    batch = normalise_text(text if text.endswith("\n") else text + "\n")
    return scan_lines(rs, st, batch.texts, source, 1, prefixes=batch.prefixes) + flush(rs, st)
