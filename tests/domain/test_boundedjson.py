"""Outside JSON is read within a size and a nesting bound; every way past them is one InputRefused."""

from __future__ import annotations

import pytest

from supervisor.domain.boundedjson import InputRefused, json_depth, loads_bounded


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
        (b"[" * 40 + b"]" * 40, "nested deeper than 32"),
        (b"x" * 2_000_000, "over the limit of 1000000"),
        (b'{"a": 1', "not valid JSON"),
        (b"1" * 5000, "not valid JSON"),  # past Python's int digit limit
        (b"\xff\xfe", "not valid JSON"),
    ],
)
def test_each_bound_is_refused_with_a_reason(raw: bytes, reason: str) -> None:
    with pytest.raises(InputRefused) as exc:
        loads_bounded(raw, what="x.json", max_bytes=1_000_000)
    assert str(exc.value).startswith("x.json: ") and reason in str(exc.value)


def test_depth_is_counted_without_recursion_and_stops_early() -> None:
    deep: list[object] = []
    cur = deep
    for _ in range(50_000):
        nxt: list[object] = []
        cur.append(nxt)
        cur = nxt
    assert json_depth(deep, 10) == 11
    assert json_depth({"a": [1, {"b": 2}]}, 10) == 3


def test_a_hot_path_may_skip_the_depth_walk() -> None:
    assert loads_bounded(b"[" * 40 + b"]" * 40, what="x", max_bytes=1000, max_depth=None)
