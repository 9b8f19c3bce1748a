"""The lease's decisions as pure functions: when a standby takes over, and until when a holder may act."""

from __future__ import annotations

from supervisor.lease.model import (
    Claim,
    LeaseRecord,
    Seen,
    Wait,
    describe,
    looks_held,
    may_act,
    standby_step,
    valid_until,
)


def rec(
    seq: int, gen: int, *, released: bool = False, ttl: float = 10.0, renewed_at: float = 1000.0
) -> LeaseRecord:
    return LeaseRecord(seq, gen, "login1", 42, "n", ttl, renewed_at, 900.0, released)


def test_an_empty_folder_is_taken_at_once_as_generation_one() -> None:
    assert standby_step(None, 0, None, now=5.0, ttl_s=10) == Claim(1, 1)


def test_a_released_lease_is_taken_at_once_by_the_next_generation() -> None:
    assert standby_step(rec(7, 3, released=True), 7, None, now=5.0, ttl_s=10) == Claim(8, 4)


def test_a_standby_waits_a_full_ttl_of_its_own_clock_after_it_first_saw_the_newest_record() -> None:
    first = standby_step(rec(7, 3), 7, None, now=100.0, ttl_s=10)
    assert isinstance(first, Wait) and first.seen == Seen(7, 100.0) and "login1:42" in first.why
    assert isinstance(standby_step(rec(7, 3), 7, first.seen, now=109.9, ttl_s=10), Wait)
    assert standby_step(rec(7, 3), 7, first.seen, now=110.0, ttl_s=10) == Claim(8, 4)


def test_a_renewal_restarts_the_standbys_wait() -> None:
    seen = Seen(7, 100.0)
    step = standby_step(rec(8, 3), 8, seen, now=115.0, ttl_s=10)
    assert isinstance(step, Wait) and step.seen == Seen(8, 115.0)


def test_the_longer_of_the_two_ttls_is_waited_for() -> None:
    step = standby_step(rec(7, 3, ttl=60.0), 7, Seen(7, 100.0), now=130.0, ttl_s=10)
    assert isinstance(step, Wait)


def test_a_record_still_being_written_counts_as_a_live_renewal() -> None:
    step = standby_step(None, 9, Seen(8, 0.0), now=50.0, ttl_s=10)
    assert isinstance(step, Wait) and step.seen == Seen(9, 50.0)
    assert standby_step(None, 9, step.seen, now=60.0, ttl_s=10) == Claim(10, 10)


def test_a_holder_stops_acting_a_margin_before_any_standby_can_take_over() -> None:
    until = valid_until(claim_started=100.0, ttl_s=10.0, margin_s=2.0)
    assert until == 108.0
    assert may_act(until, 107.0) and not may_act(until, 108.0)
    # An sbatch that may take 3 s must start while 3 s of lease are left.
    assert may_act(until, 104.9, need_s=3.0) and not may_act(until, 105.1, need_s=3.0)


def test_describe_says_who_holds_it_and_whether_it_expired() -> None:
    assert "held by login1:42, generation 3" in describe(rec(7, 3), now_wall=1003.0)
    assert "expired" in describe(rec(7, 3), now_wall=1100.0)
    assert "free" in describe(rec(7, 3, released=True), now_wall=1001.0)
    assert "no daemon" in describe(None, 0.0)


def test_a_record_round_trips_and_a_torn_one_reads_as_none() -> None:
    r = rec(7, 3)
    assert LeaseRecord.from_json(7, r.to_json()) == r
    assert LeaseRecord.from_json(8, r.to_json()) is None  # in the wrong file
    assert LeaseRecord.from_json(7, r.to_json()[:20]) is None


def test_the_cli_hands_commands_over_only_to_a_holder_that_renewed_within_its_ttl() -> None:
    assert looks_held(rec(3, 1, renewed_at=1000.0), now_wall=1005.0)
    assert not looks_held(rec(3, 1, renewed_at=1000.0), now_wall=1011.0)  # silent: watched for the ttl
    assert not looks_held(rec(3, 1, released=True), now_wall=1000.5)  # released: the CLI may take it
    assert not looks_held(None, now_wall=1000.0)  # no daemon ever held it


def test_a_holder_known_to_be_gone_is_taken_over_at_once_not_after_the_ttl() -> None:
    assert isinstance(standby_step(rec(7, 3), 7, None, now=5.0, ttl_s=10), Wait)
    assert standby_step(rec(7, 3), 7, None, now=5.0, ttl_s=10, holder_gone=True) == Claim(8, 4)
