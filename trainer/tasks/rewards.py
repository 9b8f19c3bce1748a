"""Verifiable rewards: pure string functions, so they are trivially tested and never drift."""

from __future__ import annotations

from collections.abc import Callable


def exact_match(response: str, answer: str) -> float:
    return 1.0 if response.strip() == answer.strip() else 0.0


def partial_credit(response: str, answer: str) -> float:
    """Share of positions that match, over the longer of the two strings.

    Why partial credit: a random policy must sometimes score above zero or every GRPO group
    is all-zero and there is no gradient at all.
    """
    r, a = response.strip(), answer.strip()
    if not r and not a:
        return 1.0
    hits = sum(1 for x, y in zip(r, a, strict=False) if x == y)
    return hits / max(len(r), len(a))


REWARDS: dict[str, Callable[[str, str], float]] = {
    "exact_match": exact_match,
    "partial_credit": partial_credit,
}
