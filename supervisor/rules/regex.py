"""Rule regexes run in RE2, a linear-time engine, so no pattern and no log line can stall the matcher.

Python's `re` backtracks: `(a|aa)+$X` over forty `a`s runs for minutes and blocks the daemon's event loop.
Rules files come from users (a spec's `rules.files`, a team's shared rules), so every rule regex is
compiled here, by google-re2 (the engine behind Go's regexp, Prometheus and Alertmanager), whose match time
is linear in the text whatever the pattern. What RE2 cannot run in linear time (backreferences,
lookarounds, atomic groups, possessive repeats) is refused when the rules file is loaded, with a reason a
rule author can act on.
"""

from __future__ import annotations

import importlib
import re
from typing import Any

import re2  # type: ignore[import-untyped]

MAX_REGEX_CHARS = 4096  # the longest default rule regex is ~400 characters
# RE2's compiled size in instructions: what its NFA steps through per byte when the DFA gives up. The default
# rules' largest is ~430.
MAX_PROGRAM_SIZE = 2000
REGEX_MAX_MEM = (
    4 << 20
)  # RE2's per-regex budget for its program and DFA cache (past it: slower NFA, still linear)

Pattern = Any  # re2's compiled pattern (the module ships no type information)
Match = Any

_OPTIONS = re2.Options()
_OPTIONS.max_mem = REGEX_MAX_MEM
_OPTIONS.log_errors = False  # RE2 would print every refused pattern on stderr

# Constructs a backtracking engine accepts and RE2 refuses, found in the pattern text (outside classes and
# escapes) to say what is wrong in the rule author's terms rather than RE2's.
_UNSUPPORTED = (
    (re.compile(r"\(\?<?[=!]"), "lookarounds ((?=...), (?!...), (?<=...), (?<!...))"),
    (re.compile(r"\\[1-9]|\(\?P=|\\g<|\\k<"), "backreferences (\\1, (?P=name))"),
    (re.compile(r"\(\?>"), "atomic groups ((?>...))"),
    (re.compile(r"(?:[*+?}])\+"), "possessive repeats (*+, ++, ?+)"),
    (re.compile(r"\(\?\("), "conditionals ((?(1)...))"),
)
_HINT = (
    "rule regexes run in RE2, a linear-time engine, which does not support {what}; match the text itself, "
    "and put what must not be on the line in `exclude:`"
)


def _outside_classes(pattern: str) -> str:
    """The pattern with character classes blanked and escaped characters kept as pairs, for `_UNSUPPORTED`."""
    out: list[str] = []
    i, n = 0, len(pattern)
    in_class = False
    while i < n:
        c = pattern[i]
        if c == "\\" and i + 1 < n:
            out.append(" " + " " if in_class else pattern[i : i + 2])
            i += 2
            continue
        if in_class:
            if c == "]":
                in_class = False
            out.append(" ")
        else:
            if c == "[":
                in_class = True
                if pattern.startswith("]", i + 1) or pattern.startswith("^]", i + 1):
                    out.append(" " * (2 if pattern[i + 1] == "]" else 3))
                    i += 2 if pattern[i + 1] == "]" else 3
                    continue
            out.append(" " if in_class else c)
        i += 1
    return "".join(out)


def why_refused(pattern: str, engine_error: str) -> str:
    """A rule author's reason for RE2's refusal of `pattern`."""
    plain = _outside_classes(pattern)
    for rx, what in _UNSUPPORTED:
        if rx.search(plain):
            return _HINT.format(what=what)
    if "\\Z" in plain:
        return "RE2 spells the end of text `\\z` (Python's `\\Z`)"
    if "pattern too large" in engine_error:
        return (
            f"the compiled pattern is over RE2's memory budget ({REGEX_MAX_MEM >> 20} MiB): "
            "make large counted repeats ({n,m}) smaller"
        )
    return f"RE2 cannot compile it: {engine_error}"


_sre: Any = importlib.import_module("re._parser")
_c: Any = importlib.import_module("re._constants")
_ENDS = frozenset({"AT_END", "AT_END_STRING", "AT_END_LINE"})


def never_matches(pattern: str) -> str | None:
    r"""Why `pattern` can never match, for the one shape that is surely a mistake, else None.

    An end anchor (`$`, `\z`) followed by a character other than a newline (`(a|aa)+$X`) matches no text:
    the rule would silently never fire. Read with Python's parser (RE2 exposes no syntax tree); a pattern it
    cannot parse is not judged here.
    """
    try:
        parsed = _sre.parse(pattern)
    except (re.error, RecursionError, OverflowError, ValueError):
        return None
    stack: list[Any] = [list(parsed)]
    while stack:
        items = stack.pop()
        anchored_at = None
        for op, av in items:
            if op is _c.AT:
                if str(av) in _ENDS:
                    anchored_at = str(av)
                continue
            if anchored_at is not None and op is _c.LITERAL and av != 10:
                return (
                    f"`$` (end of line) is followed by {chr(av)!r}, so this part of the regex can never match"
                )
            anchored_at = None if op is not _c.AT else anchored_at
            if op is _c.SUBPATTERN:
                stack.append(list(av[3]))
            elif op is _c.BRANCH:
                stack.extend(list(b) for b in av[1])
            elif op in (_c.MAX_REPEAT, _c.MIN_REPEAT):
                stack.append(list(av[2]))
    return None


def compile_regex(pattern: str, *, multiline: bool = False) -> Pattern:
    """The RE2 pattern for a rule regex; raises ValueError with the reason a rule author can act on.

    multiline=True makes `^` and `$` match at every line of a multi-line event (a grouped traceback), as
    they did under Python's re.MULTILINE.
    """
    if len(pattern) > MAX_REGEX_CHARS:
        raise ValueError(f"regex is {len(pattern)} characters long; the limit is {MAX_REGEX_CHARS}")
    if "\x00" in pattern:
        raise ValueError("regex must not contain NUL characters")
    try:
        compiled = re2.compile(f"(?m){pattern}" if multiline else pattern, _OPTIONS)
    except re2.error as exc:
        raise ValueError(f"invalid regex: {why_refused(pattern, str(exc))}") from exc
    if compiled.programsize > MAX_PROGRAM_SIZE:
        raise ValueError(
            f"invalid regex: too complex to match quickly (RE2 program of {compiled.programsize} "
            f"instructions, limit {MAX_PROGRAM_SIZE}): split it into several rules or shorten it"
        )
    return compiled


def check_regex(pattern: str, *, may_match_empty: bool = True) -> str:
    """Validate a rule regex (model field validator): it must compile in RE2, within the bounds above, and
    be able to match something."""
    compiled = compile_regex(pattern, multiline=True)
    if not may_match_empty and compiled.search(b"") is not None:
        raise ValueError("invalid regex: it matches the empty string, so it would fire on every line")
    why = never_matches(pattern)
    if why is not None:
        raise ValueError(f"invalid regex: {why}")
    return pattern
