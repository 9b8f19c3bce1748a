"""The suite's own file order (tests/support/order.py): the longest files are handed out first, and each
NeMo RL ray.sub file comes with a file that starts no Ray, for the worker that must not wait on the lock."""

from __future__ import annotations

from tests.support.order import SECONDS, SuiteFile, file_order


def test_longest_first_and_each_ray_sub_file_beside_one_without_ray() -> None:
    files = [
        SuiteFile("short-plain", "plain", 1, True),
        SuiteFile("raysub-long", "ray_stop", 8, True),
        SuiteFile("ray-long", "ray", 20, True),
        SuiteFile("raysub-short", "ray_stop", 1, True),
        SuiteFile("long-plain", "plain", 30, True),
        SuiteFile("unit", "plain", 50, False),
    ]
    assert file_order(files) == [
        "raysub-long",
        "long-plain",
        "raysub-short",
        "short-plain",
        "ray-long",
        "unit",
    ]


def test_with_three_workers_a_ray_sub_file_is_followed_by_two_without_ray() -> None:
    files = [
        SuiteFile("raysub-a", "ray_stop", 8, True),
        SuiteFile("raysub-b", "ray_stop", 4, True),
        SuiteFile("p1", "plain", 30, True),
        SuiteFile("p2", "plain", 20, True),
        SuiteFile("p3", "plain", 10, True),
    ]
    assert file_order(files, workers=3) == ["raysub-a", "p1", "p2", "raysub-b", "p3"]


def test_a_measured_file_is_placed_by_its_seconds_an_unknown_one_by_its_tests() -> None:
    measured = next(iter(SECONDS))
    assert SuiteFile(measured, "plain", 1, True).seconds == SECONDS[measured]
    assert SuiteFile("tests/new_test.py", "ray", 3, True).seconds > SuiteFile("x", "plain", 3, False).seconds
