"""Where each key of a TOML document is, so a settings problem can name its line as spec problems do.

`tomllib` returns plain dicts with no positions (only its syntax errors carry a line), and no TOML parser
among our dependencies keeps them. A document `tomllib` has already accepted is regular enough that one pass
over its lines finds every table header and `key = value` line, once strings, comments and the insides of
multi-line values are skipped; a key inside an inline table or an array is located at its enclosing key.
"""

from __future__ import annotations

import re
import tomllib
from typing import Any

KeyPath = tuple[str, ...]

_BARE = re.compile(r"[A-Za-z0-9_-]+")
_SYNTAX_AT = re.compile(r"\s*\(at line (\d+), column (\d+)\)\s*$")


def parse_toml(text: str) -> tuple[dict[str, Any], dict[KeyPath, int]]:
    """The document and the line of every key path in it; raises `tomllib.TOMLDecodeError` on bad syntax."""
    return tomllib.loads(text), key_lines(text)


def syntax_error_at(exc: tomllib.TOMLDecodeError) -> tuple[int | None, str]:
    """tomllib's message as (line, reason): "Invalid value (at line 4, column 10)" -> (4, "Invalid value
    (column 10)")."""
    message = str(exc)
    m = _SYNTAX_AT.search(message)
    if m is None:
        return None, message
    return int(m.group(1)), f"{message[: m.start()]} (column {m.group(2)})"


def nearest_line(lines: dict[KeyPath, int], path: KeyPath) -> int | None:
    """The line of `path`, else of the nearest enclosing key or table that has one."""
    while path:
        if path in lines:
            return lines[path]
        path = path[:-1]
    return None


def key_lines(text: str) -> dict[KeyPath, int]:
    """The line (1-based) of every table header and key of an accepted TOML document."""
    lines: dict[KeyPath, int] = {}
    table: KeyPath = ()
    scan = _ValueScan()
    for number, line in enumerate(text.splitlines(), start=1):
        if scan.inside:  # a multi-line string or array that began on an earlier line
            scan.feed(line)
            continue
        stripped = line.lstrip()
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.startswith("["):
            inner = stripped[2:] if stripped.startswith("[[") else stripped[1:]
            parts, _ = _dotted_key(inner)
            table = tuple(parts)
            lines.setdefault(table, number)
            continue
        parts, rest = _dotted_key(stripped)
        if parts and rest.startswith("="):
            path = (*table, *parts)
            for depth in range(len(table) + 1, len(path) + 1):  # `a.b = 1` also defines table `a`
                lines.setdefault(path[:depth], number)
            scan.feed(rest[1:])
    return lines


def _dotted_key(text: str) -> tuple[list[str], str]:
    """`a."b.c".d = ...` -> (["a", "b.c", "d"], "= ..."): the key's parts and what follows it."""
    parts: list[str] = []
    i = 0
    while True:
        while i < len(text) and text[i] in " \t":
            i += 1
        if i < len(text) and text[i] in "\"'":
            quote = text[i]
            end = i + 1
            while end < len(text) and text[end] != quote:
                end += 2 if quote == '"' and text[end] == "\\" else 1
            raw = text[i + 1 : end]
            parts.append(tomllib.loads(f"k = {quote}{raw}{quote}")["k"] if "\\" in raw else raw)
            i = end + 1
        else:
            m = _BARE.match(text, i)
            if m is None:
                return parts, text[i:]
            parts.append(m.group())
            i = m.end()
        while i < len(text) and text[i] in " \t":
            i += 1
        if i < len(text) and text[i] == ".":
            i += 1
            continue
        return parts, text[i:]


class _ValueScan:
    """Follows a value across lines: open brackets and multi-line strings, skipping strings and comments."""

    def __init__(self) -> None:
        self.depth = 0
        self.open_string: str | None = None  # '\"\"\"' or "'''" while a multi-line string is open

    @property
    def inside(self) -> bool:
        return self.depth > 0 or self.open_string is not None

    def feed(self, text: str) -> None:
        i = 0
        while i < len(text):
            if self.open_string is not None:
                end = text.find(self.open_string, i)
                if end < 0:
                    return
                i = end + 3
                self.open_string = None
                continue
            c = text[i]
            if c == "#":
                return
            if text.startswith(('"""', "'''"), i):
                self.open_string = text[i : i + 3]
                i += 3
            elif c in "\"'":
                end = i + 1
                while end < len(text) and text[end] != c:
                    end += 2 if c == '"' and text[end] == "\\" else 1
                i = end + 1
            else:
                if c in "[{":
                    self.depth += 1
                elif c in "]}":
                    self.depth -= 1
                i += 1
