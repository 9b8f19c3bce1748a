"""Turn raw log bytes into clean text lines that rules can match.

Everything here is pure and works on whole chunks first: the benchmark pushes
hundreds of megabytes through tailer + normaliser + rules, so the common line
(no colour, no carriage return, no Ray prefix) must cost no Python per-line
work beyond the split. Chunk-wide `in` tests and C-level regex substitutions
decide whether the slower per-line path is needed at all.

One input line gives exactly one output line, so line numbers stay those of
the file. Text that tqdm's carriage returns would have hidden but that is not
a progress bar (an error spliced into a bar, see real-failure-logs #3) is kept
and joined to the last segment with `SEGMENT_SEP`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import accumulate, count
from operator import add, methodcaller

MAX_LINE_CHARS = 64 * 1024
SEGMENT_SEP = " \u23ce "  # joins text kept from `\r`-separated segments of one physical line

# CSI sequences (colours, cursor moves), OSC titles, two-byte escapes, and the bare `[36m`
# that survives when a collector drops the ESC byte (real-failure-logs #4).
_ANSI_RE = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]|\[\d{1,3}(?:;\d{1,3})*m(?!\])"
)
_BARE_ANSI_RE = re.compile(r"\[\d{1,3}(?:;\d{1,3})*m(?!\])")

# Ray's per-worker prefixes: `(pid=1)`, `(Worker pid=1, ip=10.0.0.1)`, `(DTensorPolicyWorker[rank=0] pid=7)`,
# `(raylet, ip=...)`, `(autoscaler +2m3s)`; they can nest: `(VLLMEngine pid=1) (APIServer pid=2)`.
# Torch elastic's `[rank7]:` and vLLM's `[vllm]:` are prefixes of the same kind.
_RAY_PREFIX = (
    r"\((?:(?:[^()\s]+ )?pid=\d+(?:, ip=[0-9A-Fa-f.:]+)?(?:, [^()]*)?"
    r"|(?:raylet|gcs_server|autoscaler|monitor|dashboard|dashboard_agent|runtime_env_agent|log_monitor)"
    r"(?:[ ,][^()]*)?)\)[ \t]?"
)
_RANK_PREFIX = r"\[(?:rank\d+|vllm)\]:[ \t]?"
_PREFIX_RE = re.compile(f"(?:{_RAY_PREFIX}|{_RANK_PREFIX})")
# Chunk-wide forms, one per opening character, each starting with a literal ("\n(" / "\n[") that the
# regex engine scans for quickly; stacked prefixes after the first are consumed too.
_NL_PREFIX_RES = (
    ("\n(", re.compile(f"\\n({_RAY_PREFIX}(?:{_PREFIX_RE.pattern})*)")),
    ("\n[", re.compile(f"\\n({_RANK_PREFIX}(?:{_PREFIX_RE.pattern})*)")),
)
_ESC_RE = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")
_COUNT_NL = methodcaller("count", "\n")
_REPEATED_RE = re.compile(r"\s*\[repeated (\d+)x across cluster\]\s*$")

# A segment that is nothing but a tqdm bar (with or without total); anything else in a `\r` line is kept.
_BAR_PATTERN = (
    r"^\s*(?:[^\r\n]{0,300}?:\s*)?"
    r"(?:\d{1,3}%\|[^|\r\n]*\|\s*[\d.]+[kMGTP]?/[\d.?]+[kMGTP]?"
    r"|[\d.]+[kMGTP]?[A-Za-z_]*)"
    r"\s*\[(?:\d[\d:]*|\?)(?:<[\d:?]+)?,[^\[\]\r\n]*\]\s*$"
)
_BAR_RE = re.compile(_BAR_PATTERN)
_BAR_RE_B = re.compile(_BAR_PATTERN.encode())
_TRAILING_WS_RE = re.compile(r"[ \t]+$", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class Line:
    """One normalised line; `prefix` is the Ray/rank prefix that was stripped from `text`."""

    text: str
    prefix: str = ""
    repeated: int = 1  # Ray's "[repeated Nx across cluster]" count, suffix removed from text
    truncated: int = 0  # bytes dropped from an over-long line


@dataclass(slots=True)
class LineBatch:
    """Consecutive normalised lines; metadata lives in sparse dicts so the common line is a bare str."""

    first_line: int = 1
    texts: list[str] = field(default_factory=list)
    prefixes: dict[int, str] = field(default_factory=dict)  # index in texts -> stripped prefix
    repeats: dict[int, int] = field(default_factory=dict)  # index -> Ray's repeat count
    truncated: dict[int, int] = field(default_factory=dict)  # index -> bytes dropped

    def __len__(self) -> int:
        return len(self.texts)

    def line(self, i: int) -> Line:
        return Line(self.texts[i], self.prefixes.get(i, ""), self.repeats.get(i, 1), self.truncated.get(i, 0))

    def __iter__(self) -> Iterator[tuple[int, Line]]:
        """(1-based line number, line) pairs."""
        for i in range(len(self.texts)):
            yield self.first_line + i, self.line(i)

    def extend(self, other: LineBatch) -> None:
        base = len(self.texts)
        self.texts.extend(other.texts)
        self.prefixes.update({base + k: v for k, v in other.prefixes.items()})
        self.repeats.update({base + k: v for k, v in other.repeats.items()})
        self.truncated.update({base + k: v for k, v in other.truncated.items()})


def is_bar_segment(segment: str) -> bool:
    return _BAR_RE.match(segment) is not None


def collapse_cr(text: str) -> str:
    """What a terminal would show, plus any non-bar text that a later redraw would have overwritten."""
    segments = [s for s in text.split("\r") if s.strip()]
    if not segments:
        return ""
    kept = [s for s in segments[:-1] if not _BAR_RE.match(s)]
    kept.append(segments[-1])
    return SEGMENT_SEP.join(kept)


def collapse_cr_bytes(data: bytes) -> bytes:
    """`collapse_cr` for a partial line still being written; keeps the unfinished last segment."""
    segments = data.split(b"\r")
    last = segments[-1]
    kept = [s for s in segments[:-1] if s.strip() and not _BAR_RE_B.match(s)]
    return b"\r".join([*kept, last])


def split_prefix(text: str) -> tuple[str, str]:
    """(prefix, rest): peels stacked Ray/rank prefixes off the start of a line."""
    pos = 0
    n = len(text)
    while pos < n and text[pos] in " \t":
        pos += 1
    start = pos
    while True:
        m = _PREFIX_RE.match(text, pos)
        if m is None:
            break
        pos = m.end()
        while pos < n and text[pos] in " \t":
            pos += 1
    if pos == start:
        return "", text
    return text[start:pos].rstrip(), text[pos:]


def _cap(text: str, max_chars: int) -> tuple[str, int]:
    head = text[:max_chars]
    dropped = len(text.encode("utf-8", "replace")) - len(head.encode("utf-8", "replace"))
    return f"{head}…[truncated {dropped} bytes]", dropped


def _fix_line(text: str, batch: LineBatch, i: int) -> str:
    """The slow path for a line with `\r` or a repeat suffix (ANSI and leading prefixes are gone already)."""
    if "\r" in text:
        text = collapse_cr(text)
        # Ray prints a prefix per physical line; one found after the collapse belongs to the last segment.
        if text[:1] in ("(", "[") and i not in batch.prefixes:
            prefix, text = split_prefix(text)
            if prefix:
                batch.prefixes[i] = prefix
    if "[repeated " in text:
        m = _REPEATED_RE.search(text)
        if m is not None:
            batch.repeats[i] = int(m.group(1))
            text = text[: m.start()]
    return text.rstrip(" \t")


def _strip_prefixes(text: str, prefixes: dict[int, str]) -> str:
    """Remove line-start prefixes in one pass over the chunk, recording them by line index.

    Only C-level calls per match (re.split, map, accumulate): Ray driver logs prefix most lines.
    """
    src = "\n" + text
    for literal, regex in _NL_PREFIX_RES:
        if literal not in src:
            continue
        parts = regex.split(src)
        if len(parts) == 1:
            continue
        segs = parts[0::2]
        # the k-th prefix starts line (newlines in segs[0..k]) + k (each match consumed one newline)
        starts = map(add, accumulate(map(_COUNT_NL, segs[:-1])), count())
        prefixes.update(zip(starts, map(str.rstrip, parts[1::2]), strict=False))
        src = "\n".join(segs)
    return src[1:]


def _lines_containing(text: str, needle: str, found: set[int]) -> None:
    """Indices of lines holding `needle`, found with C-level scans instead of a loop over every line."""
    pos = text.find(needle)
    prev = 0
    line = 0
    while pos >= 0:
        line += text.count("\n", prev, pos)
        found.add(line)
        nl = text.find("\n", pos)
        if nl < 0:
            return
        prev = pos
        pos = text.find(needle, nl)


def normalise_text(text: str, first_line: int = 1, max_chars: int = MAX_LINE_CHARS) -> LineBatch:
    """Normalise complete lines (no trailing partial) already decoded; a trailing newline is optional."""
    batch = LineBatch(first_line=first_line)
    if not text:
        return batch  # no line at all; a lone "\n" is one empty line
    if text[-1] == "\n":
        text = text[:-1]
    if "\x00" in text:
        text = text.replace("\x00", "")
    if "\x1b" in text:
        text = _ESC_RE.sub("", text)
    if _BARE_ANSI_RE.search(text) is not None:
        text = _BARE_ANSI_RE.sub("", text)
    if " \n" in text or text[-1:] in (" ", "\t"):  # (a lone trailing tab in a chunk is left)
        text = _TRAILING_WS_RE.sub("", text)
    text = _strip_prefixes(text, batch.prefixes)
    texts = text.split("\n")
    batch.texts = texts
    slow: set[int] = set()
    if "\r" in text:
        _lines_containing(text, "\r", slow)
    if "[repeated " in text:
        _lines_containing(text, "[repeated ", slow)
    for i in slow:
        texts[i] = _fix_line(texts[i], batch, i)
    if len(text) > max_chars and max(map(len, texts)) > max_chars:
        for i, t in enumerate(texts):
            if len(t) > max_chars:
                texts[i], batch.truncated[i] = _cap(t, max_chars)
    return batch


def normalise_chunk(data: bytes, first_line: int = 1, max_chars: int = MAX_LINE_CHARS) -> LineBatch:
    """Normalise complete lines of raw bytes (cut at a newline); bad UTF-8 is replaced."""
    return normalise_text(data.decode("utf-8", "replace"), first_line, max_chars)


def normalise_line(raw: bytes | str, max_chars: int = MAX_LINE_CHARS) -> Line:
    """One line, for callers that do not batch (tests, replays)."""
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    text = text.rstrip("\n")
    if "\n" in text:
        text = text.replace("\n", " ")
    batch = normalise_text(text + "\n", 1, max_chars)
    return batch.line(0) if batch.texts else Line("")
