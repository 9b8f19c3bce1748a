"""The suite's own file order (tests/support/order.py): NeMo RL's ray.sub files are one unit of work, handed
out first, then enough files without Ray to keep the other workers busy while it runs, then the rest longest
first."""

from __future__ import annotations

import re
from pathlib import Path

from tests.support.order import RAY_SUB_FILES, RAY_SUB_UNIT, SECONDS, SuiteFile, file_order, scope

REPO = Path(__file__).resolve().parents[1]


def test_ray_sub_files_first_then_files_without_ray_for_the_other_workers_then_longest_first() -> None:
    files = [
        SuiteFile("short-plain", "plain", 1, True),  # 10 s
        SuiteFile("raysub-long", "ray_stop", 2, True),  # 120 s
        SuiteFile("ray-long", "ray", 20, True),  # 600 s
        SuiteFile("raysub-short", "ray_stop", 1, True),  # 60 s
        SuiteFile("long-plain", "plain", 30, True),  # 300 s
        SuiteFile("mid-plain", "plain", 6, True),  # 60 s
        SuiteFile("unit", "plain", 50, False),  # 5 s
    ]
    # 180 s of ray.sub files: one other worker needs 180 s without Ray (long-plain covers it).
    assert file_order(files, workers=2) == [
        "raysub-long",
        "raysub-short",
        "long-plain",
        "ray-long",
        "mid-plain",
        "short-plain",
        "unit",
    ]
    # Two other workers need 360 s: long-plain and mid-plain before the Ray file.
    assert file_order(files, workers=3)[:5] == [
        "raysub-long",
        "raysub-short",
        "long-plain",
        "mid-plain",
        "ray-long",
    ]


def test_the_ray_sub_files_are_one_unit_of_work_and_every_other_file_its_own() -> None:
    assert {scope(f"{path}::test_x[main]") for path in RAY_SUB_FILES} == {RAY_SUB_UNIT}
    assert scope("tests/integration/test_daemon.py::test_y") == "tests/integration/test_daemon.py"


def test_the_ray_sub_files_are_every_file_with_a_ray_stop_test() -> None:
    marked = sorted(
        str(p.relative_to(REPO))
        for p in (REPO / "tests").rglob("test_*.py")
        if re.search(r"pytest\.mark\.ray_stop\b", p.read_text(encoding="utf-8"))
        and p.name != "test_suite_order.py"
    )
    assert marked == sorted(RAY_SUB_FILES)


def test_a_measured_file_is_placed_by_its_seconds_an_unknown_one_by_its_tests() -> None:
    measured = next(iter(SECONDS))
    assert SuiteFile(measured, "plain", 1, True).seconds == SECONDS[measured]
    assert SuiteFile("tests/new_test.py", "ray", 3, True).seconds > SuiteFile("x", "plain", 3, False).seconds
