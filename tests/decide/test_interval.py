"""Young/Daly's interval, its conversion to steps, and a save period that never orphans a kept checkpoint."""

from __future__ import annotations

import math

import pytest

from supervisor.decide.interval import interval_steps, safe_save_period, young_daly_interval_s


def test_young_daly_is_the_square_root_of_twice_save_time_times_mtbf() -> None:
    # A 60-s save and a 3.1-h MTBF: about 20 minutes between checkpoints.
    assert young_daly_interval_s(60.0, 3.1 * 3600) == pytest.approx(math.sqrt(2 * 60 * 11160))
    assert young_daly_interval_s(60.0, 3.1 * 3600) == pytest.approx(1157.2, abs=0.1)


def test_young_daly_grows_with_the_square_root_of_each_cost() -> None:
    base = young_daly_interval_s(10.0, 3600.0)
    assert young_daly_interval_s(40.0, 3600.0) == pytest.approx(2 * base)
    assert young_daly_interval_s(10.0, 4 * 3600.0) == pytest.approx(2 * base)


@pytest.mark.parametrize(
    ("save_s", "mtbf_s"), [(0.0, 3600.0), (10.0, 0.0), (-1.0, 3600.0), (math.nan, 3600.0)]
)
def test_young_daly_refuses_costs_that_were_not_measured(save_s: float, mtbf_s: float) -> None:
    with pytest.raises(ValueError):
        young_daly_interval_s(save_s, mtbf_s)


def test_an_interval_in_seconds_becomes_whole_steps_and_never_zero() -> None:
    assert interval_steps(1157.0, 60.0) == 19
    assert interval_steps(1190.0, 60.0) == 20
    assert interval_steps(5.0, 60.0) == 1


def test_with_nothing_kept_any_period_is_safe() -> None:
    assert safe_save_period(37, 10, []) == 37
    assert safe_save_period(3, 10, [25]) == 3  # step_25 (a deadline save) is not aligned: not kept by top-k


def test_a_longer_period_is_taken_only_when_every_kept_step_stays_aligned() -> None:
    # Kept at 20, 40, 60 under period 10: 20 keeps them all aligned.
    assert safe_save_period(20, 10, [20, 40, 60]) == 20
    # Kept at 10, 20, 30: 20 would orphan step_10 and step_30, so the period stays 10.
    assert safe_save_period(20, 10, [10, 20, 30]) == 10
    assert safe_save_period(100, 10, [10, 20, 30]) == 10


def test_a_shorter_period_is_a_divisor_of_the_kept_steps() -> None:
    assert safe_save_period(4, 10, [10, 20, 30]) == 5  # divisors of 10: 1, 2, 5, 10; 4 is nearest 5
    assert safe_save_period(3, 10, [10, 20, 30]) == 2  # 2 is one step away, 5 two
    assert safe_save_period(1, 10, [10, 20, 30]) == 1


def test_ties_go_to_the_longer_period() -> None:
    assert safe_save_period(3, 4, [4, 8]) == 4  # divisors of 4: 1, 2, 4; 3 is as near 2 as 4


def test_the_chosen_period_keeps_every_aligned_kept_step_aligned() -> None:
    for old in range(1, 13):
        kept = [old * k for k in (3, 5, 6)]
        for target in range(1, 80):
            new = safe_save_period(target, old, kept)
            assert all(step % new == 0 for step in kept)
