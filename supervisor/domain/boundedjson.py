"""JSON from outside (trainer files, Slack) read within bounds, so one file cannot stall or crash a reader.

`json.loads` has no size or depth option: a deeply nested document raises RecursionError (not
ValueError, so callers that catch "bad JSON" crash), and a huge or deep value kept in memory is walked
again by whoever stores or prints it. Every reader of outside JSON goes through `loads_bounded`, which
turns each of these into one `InputRefused` (a ValueError) whose message says which bound was crossed.
"""

from __future__ import annotations

import json
from typing import Any

DEFAULT_MAX_DEPTH = 32


class InputRefused(ValueError):
    """An input past one of its bounds, or not parseable; the message is for the person who wrote it."""


def json_depth(value: Any, limit: int) -> int:
    """Nesting depth of a parsed JSON value, counted without recursion and stopping once past `limit`."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        v, d = stack.pop()
        if not isinstance(v, dict | list):
            continue
        deepest = max(deepest, d)
        if deepest > limit:
            return deepest
        stack.extend((c, d + 1) for c in (v.values() if isinstance(v, dict) else v))
    return deepest


def loads_bounded(
    raw: bytes | str, *, what: str, max_bytes: int, max_depth: int | None = DEFAULT_MAX_DEPTH
) -> Any:
    """`json.loads` with a size and a nesting bound; raises `InputRefused` naming `what` and the bound.

    max_depth=None skips the depth walk (for hot paths that read only the top level); RecursionError
    from the C decoder is still refused.
    """
    if len(raw) > max_bytes:
        raise InputRefused(f"{what}: {len(raw)} bytes, over the limit of {max_bytes}")
    try:
        data = json.loads(raw)
    except RecursionError as exc:
        raise InputRefused(f"{what}: nested too deeply to read") from exc
    except (ValueError, UnicodeDecodeError) as exc:
        raise InputRefused(f"{what}: not valid JSON ({exc})") from exc
    if max_depth is not None and json_depth(data, max_depth) > max_depth:
        raise InputRefused(f"{what}: nested deeper than {max_depth} levels")
    return data
