"""Deriving prefilter literals from a regex.

Running every rule's regex on every line is ~30x slower than grep. Nearly
every failure signature contains a fixed string ("CUDA out of memory",
"Watchdog caught"), so we find, for each regex, a set of literals such that
any match must contain at least one of them; a cheap substring search over a
whole chunk then selects the few lines worth a real regex match.
"""

from __future__ import annotations

import importlib
import re
from typing import Any

_sre: Any = importlib.import_module("re._parser")
_c: Any = importlib.import_module("re._constants")

MIN_LITERAL = 3


def _seq_literals(items: Any, flags: int) -> list[str] | None:
    """Required literal alternatives for a sequence of parsed items, or None if we cannot find any."""
    best: list[str] | None = None

    def consider(alts: list[str] | None) -> None:
        nonlocal best
        if not alts or any(len(a) < MIN_LITERAL for a in alts):
            return
        # Prefer the candidate whose shortest alternative is longest (fewer false hits), then fewer.
        if best is None or (min(map(len, alts)), -len(alts)) > (min(map(len, best)), -len(best)):
            best = alts

    run: list[str] = []
    for op, av in items:
        if op is _c.LITERAL and not flags & re.IGNORECASE:
            run.append(chr(av))
            continue
        consider(["".join(run)] if run else None)
        run = []
        if op is _c.SUBPATTERN:
            _group, add_flags, del_flags, sub = av
            sub_flags = (flags | add_flags) & ~del_flags
            consider(_seq_literals(sub, sub_flags))
        elif op is _c.BRANCH:
            consider(_branch_literals(av[1], flags))
        elif op in (_c.MAX_REPEAT, _c.MIN_REPEAT, _c.POSSESSIVE_REPEAT):
            lo, _hi, sub = av
            if lo >= 1:
                consider(_seq_literals(sub, flags))
        elif op is _c.ATOMIC_GROUP:
            consider(_seq_literals(av, flags))
    consider(["".join(run)] if run else None)
    return best


def _branch_literals(branches: Any, flags: int) -> list[str] | None:
    out: list[str] = []
    for br in branches:
        alts = _seq_literals(br, flags)
        if alts is None:
            return None
        out.extend(alts)
    return sorted(set(out))


def derive_literals(pattern: str) -> list[str] | None:
    """Literals one of which every match of `pattern` contains; None when there is no (useful) such set."""
    try:
        parsed = _sre.parse(pattern)
    except re.error:
        return None
    flags = parsed.state.flags
    if flags & re.IGNORECASE:
        return None
    items = list(parsed)
    if len(items) == 1 and items[0][0] is _c.BRANCH:
        return _branch_literals(items[0][1][1], flags)
    return _seq_literals(items, flags)
