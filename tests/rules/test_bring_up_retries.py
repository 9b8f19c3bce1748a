"""A launcher that retries its own Ray bring-up is let retry: `ray-startup-failed` holds what NeMo RL's
ray.sub prints on a failed try and decides on its give-up (ENDED), the job's end or the stall instead."""

from __future__ import annotations

import pytest

from supervisor.daemon.monitor import ENDED_STALL_SOURCE
from supervisor.domain.jobstate import JobState
from supervisor.domain.observations import StateEvent, Tick
from supervisor.rules.engine import Match, MatcherState, RuleSet, feed, load_ruleset, note_files, scan_lines
from supervisor.rules.loader import RulesError, load_rules_text

# What a failed `ray start --head` leaves in ray-head.log, then each version's retry line (ray.sub, NeMo RL).
GCS_ERROR = "ConnectionError: Failed to connect to GCS at address 10.0.0.1:1200 within 5 seconds."
RETRY_MAIN = "[WARN] Head node failed 1/3 times, restarting in 5 seconds..."
RETRY_V060 = "Head node failed 1/3 times, restarting in 5 seconds..."
ENDED_LINE = (
    "shepherd: nemo-rl's launcher wrote ENDED in /l/7-logs: the Ray bring-up failed "
    "(job 7; the head or a worker step did not start)"
)


@pytest.fixture(scope="module")
def rs() -> RuleSet:
    return load_ruleset()


def running() -> MatcherState:
    st = MatcherState(run_id="r", attempt=1)
    feed(load_ruleset(), st, StateEvent("r", 1, "7", JobState.RUNNING, at=0.0))
    return st


def decided(matches: list[Match]) -> list[str]:
    return [m.rule for m in matches if not m.followup]


@pytest.mark.parametrize("retry", [RETRY_MAIN, RETRY_V060], ids=["main", "v0.6.0"])
def test_a_head_start_that_fails_once_and_then_succeeds_decides_nothing(rs: RuleSet, retry: str) -> None:
    st = running()
    note_files(st, ["ray-head.log"])
    assert scan_lines(rs, st, [GCS_ERROR, retry], "ray-head.log", 1, 10.0) == []
    note_files(st, ["STARTED_RAY_HEAD", "ray-driver.log"])  # the second try came up, the driver started
    assert feed(rs, st, Tick(at=1000.0)) == []  # no bring-up stall: both files are there
    # The driver's own failure later is not blamed on the bring-up: what was held is dropped.
    assert feed(rs, st, StateEvent("r", 1, "7", JobState.FAILED, exit_code=1, at=1100.0)) == []


def test_ray_subs_give_up_decides_and_says_so(rs: RuleSet) -> None:
    st = running()
    assert scan_lines(rs, st, [GCS_ERROR, RETRY_MAIN] * 3, "ray-head.log", 1, 10.0) == []
    [m] = scan_lines(rs, st, [ENDED_LINE], ENDED_STALL_SOURCE, 1, 30.0)
    assert m.rule == "ray-startup-failed" and "wrote ENDED" in m.reason
    assert [a.resume.from_ for a in m.actions if a.resume is not None] == ["latest"]


def test_the_job_ending_failed_mid_retry_decides_with_the_held_error(rs: RuleSet) -> None:
    st = running()
    assert scan_lines(rs, st, [GCS_ERROR, RETRY_V060], "ray-head.log", 4, 10.0) == []
    st = MatcherState.from_dict(st.to_dict())  # held across a daemon restart
    [m] = feed(rs, st, StateEvent("r", 1, "7", JobState.FAILED, exit_code=1, at=20.0))
    assert m.rule == "ray-startup-failed" and not m.followup and m.actions
    assert "held while the launcher retried" in m.reason and "ended FAILED" in m.reason
    assert m.evidence.source == "ray-head.log" and m.evidence.match_line == 4
    assert "Failed to connect to GCS" in m.excerpt


def test_a_missing_started_ray_head_still_ends_a_bring_up_that_keeps_retrying(rs: RuleSet) -> None:
    st = running()
    assert scan_lines(rs, st, [GCS_ERROR, RETRY_MAIN], "ray-head.log", 1, 10.0) == []
    [m] = feed(rs, st, Tick(at=601.0))
    assert m.rule == "ray-startup-failed" and "STARTED_RAY_HEAD not written" in m.reason


def test_a_v060_head_that_dies_after_the_driver_started_is_a_failure(rs: RuleSet) -> None:
    """v0.6.0 runs `ray start --head --block` in its retry loop: the head's death mid-run prints the retry
    line too, and with the driver running it must not be taken for a bring-up retry."""
    st = running()
    note_files(st, ["STARTED_RAY_HEAD", "ray-driver.log"])
    [m] = scan_lines(rs, st, [RETRY_V060], "ray-head.log", 90, 500.0)
    assert m.rule == "ray-startup-failed" and "Head node failed 1/3" in m.excerpt and m.actions


def test_ray_errors_elsewhere_or_after_the_driver_started_act_at_once(rs: RuleSet) -> None:
    st = running()
    assert decided(scan_lines(rs, st, [GCS_ERROR], "ray-driver.log", 1, 10.0)) == ["ray-startup-failed"]
    st = running()
    note_files(st, ["ray-driver.log"])
    assert decided(scan_lines(rs, st, [GCS_ERROR], "ray-worker-1.log", 1, 10.0)) == ["ray-startup-failed"]
    st = running()
    assert decided(scan_lines(rs, st, [GCS_ERROR], "some-other.log", 1, 10.0)) == ["ray-startup-failed"]


def test_a_defer_file_must_be_relative_to_the_log_dir() -> None:
    text = """
version: 1
rules:
  - name: x
    trigger: {kind: log, regex: boom, defer: {until_file: /abs/ray-driver.log}}
    actions: [cancel]
"""
    with pytest.raises(RulesError, match="relative"):
        load_rules_text(text, "x.yaml")
