"""Young/Daly's interval, its conversion to steps, and a save period that never orphans a kept checkpoint."""

from __future__ import annotations

import math

import pytest

from supervisor.decide.interval import (
    Exposure,
    advise,
    choose_mtbf,
    interval_steps,
    safe_save_period,
    save_duration,
    seconds_per_step,
    young_daly_interval_s,
)


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


# ---- the measurements ----------------------------------------------------------------------------------


def test_a_save_runs_from_its_first_write_to_the_rename() -> None:
    # training_info.json at 100, config at 101, the policy dir last written at 150, renamed at 160.
    entries = [(100.0, 100.0), (101.0, 101.0), (150.0, 150.0)]
    assert save_duration(entries, dir_ctime=160.0) == 60.0


def test_without_a_ctime_on_rename_the_last_write_ends_the_save() -> None:
    assert save_duration([(100.0, 100.0), (130.0, 130.0)], dir_ctime=120.0) == 30.0


def test_a_staged_or_copied_step_is_not_timed() -> None:
    # Hard links and copies keep the files' mtime but set their ctime: the step was not saved then.
    assert save_duration([(100.0, 5000.0), (101.0, 5000.0)], dir_ctime=5000.0) is None
    assert save_duration([], dir_ctime=5000.0) is None


def test_seconds_per_step_is_the_median_gap_so_a_save_step_does_not_count() -> None:
    attempt1 = [(1, 0.0), (2, 10.0), (3, 20.0), (4, 90.0), (5, 100.0)]  # step 4 saved for 60 s
    attempt2 = [(3, 500.0), (5, 520.0)]  # two steps in 20 s: 10 s each
    assert seconds_per_step([attempt1, attempt2]) == 10.0
    assert seconds_per_step([[(1, 0.0)]]) is None


def test_the_runs_own_mtbf_is_used_once_it_has_three_failures() -> None:
    own = Exposure(failures=3, seconds=3 * 3600.0)
    m = choose_mtbf(own, Exposure(100, 1e9), nodes=4)
    assert m is not None and (m.source, m.seconds, m.failures) == ("run", 3600.0, 3)


def test_with_too_few_failures_the_clusters_rate_per_node_is_scaled_to_the_run() -> None:
    own = Exposure(failures=2, seconds=10 * 3600.0)
    cluster = Exposure(failures=10, seconds=1000 * 3600.0)  # node-hours: one failure per 100 node-hours
    m = choose_mtbf(own, cluster, nodes=4)
    assert m is not None and m.source == "cluster"
    assert m.seconds == pytest.approx(25 * 3600.0)  # 4 nodes: a failure every 25 h


def test_no_mtbf_without_enough_failures_anywhere() -> None:
    assert choose_mtbf(Exposure(2, 3600.0), Exposure(2, 7200.0), nodes=1) is None
    assert choose_mtbf(Exposure(0, 0.0), None, nodes=1) is None


def test_advice_puts_young_daly_beside_the_interval_in_use() -> None:
    a = advise([50.0, 60.0, 70.0], 10.0, Exposure(4, 4 * 3.1 * 3600), None, nodes=1, period=10, kept_steps=[])
    assert a.save_s == 60.0 and a.saves == 3 and a.interval_s == 100.0
    assert a.optimum_s == pytest.approx(1157.2, abs=0.1)
    assert a.optimum_steps == 116 and a.next_period == 116 and a.held == ""


def test_advice_holds_the_period_back_to_one_that_keeps_the_kept_steps() -> None:
    a = advise([60.0], 10.0, Exposure(4, 4 * 3.1 * 3600), None, nodes=1, period=10, kept_steps=[10, 20, 30])
    assert a.optimum_steps == 116 and a.next_period == 10
    assert "step_10, step_20, step_30" in a.held


def test_advice_says_nothing_it_did_not_measure() -> None:
    a = advise([], 10.0, Exposure(4, 3600.0), None, nodes=1, period=10)
    assert a.optimum_s is None and a.next_period is None and a.interval_s == 100.0
    b = advise([60.0], None, Exposure(4, 3600.0), None, nodes=1, period=10)
    assert b.optimum_s is not None and b.optimum_steps is None and b.interval_s is None
