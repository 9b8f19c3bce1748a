"""NeMo RL's ray.sub writes only its own `set -x` trace to Slurm's output file: no default rule may act on
it, although its bring-up probes print Ray's retried warnings (a false ray-startup-failed cancels a healthy
job)."""

from __future__ import annotations

from pathlib import Path

import pytest

from supervisor.rules.engine import MatcherState, RuleSet, load_ruleset
from supervisor.rules.replay import replay, replay_text

TRACES = sorted((Path(__file__).parents[1] / "data" / "nemo-rl").glob("*.slurm.out"))


@pytest.fixture(scope="module")
def rs() -> RuleSet:
    return load_ruleset()


@pytest.mark.parametrize("trace", TRACES, ids=[p.name for p in TRACES])
def test_no_default_rule_acts_on_a_ray_sub_trace(rs: RuleSet, trace: Path) -> None:
    assert [(m.rule, m.excerpt) for m in replay(rs, trace) if not m.followup] == []


def test_the_traces_are_there() -> None:
    assert len(TRACES) == 4


def test_a_warning_level_gcs_retry_is_not_a_failed_start_but_the_fatal_error_is(rs: RuleSet) -> None:
    stamp = "[2026-11-23 23:59:45,643 {} 2416 2416]"
    warning = (
        f"{stamp.format('W')} rpc_client.h:153: Failed to connect to GCS at address 10.0.0.2:6379 within 5 s"
    )
    fatal = (
        f"{stamp.format('C')} gcs_client.cc:193: Failed to connect to GCS within 60 seconds. GCS may be dead."
    )
    assert replay_text(rs, warning, "slurm-1.out", MatcherState(run_id="r", attempt=1)) == []
    [m] = [
        m
        for m in replay_text(rs, fatal, "ray-driver.log", MatcherState(run_id="r", attempt=1))
        if not m.followup
    ]
    assert m.rule == "ray-startup-failed"
