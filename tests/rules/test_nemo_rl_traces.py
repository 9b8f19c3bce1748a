"""NeMo RL's ray.sub writes only its own `set -x` trace to Slurm's output file: the rules read Slurm's own
messages there and nothing else, because its bring-up probes print Ray's warnings that, in a driver's log,
mean a failed start (a false ray-startup-failed cancelled a healthy job)."""

from __future__ import annotations

from pathlib import Path

import pytest

from supervisor.rules.engine import MatcherState, RuleSet, load_ruleset
from supervisor.rules.replay import replay_text
from supervisor.slurm.launchers import layout, nemo_rl, shepherd

TRACES = sorted((Path(__file__).parents[1] / "data" / "nemo-rl").glob("*.slurm.out"))
GCS_WARNING = (
    "[2026-11-23 23:59:45,643 W 2416 2416] rpc_client.h:153: Failed to connect to GCS at address "
    "192.0.2.2:1200 within 5 seconds."
)


@pytest.fixture(scope="module")
def rs() -> RuleSet:
    return load_ruleset()


def as_rules_see_it(contract: layout.FileContract, text: str) -> str:
    return "\n".join(layout.rule_text(contract, True, line) for line in text.splitlines())


def decided(rs: RuleSet, text: str, source: str) -> list[tuple[str, str]]:
    out = replay_text(rs, text, source, MatcherState(run_id="r", attempt=1))
    return [(m.rule, m.excerpt) for m in out if not m.followup]


@pytest.mark.parametrize("trace", TRACES, ids=[p.name for p in TRACES])
def test_no_default_rule_acts_on_a_ray_sub_trace(rs: RuleSet, trace: Path) -> None:
    assert decided(rs, as_rules_see_it(nemo_rl.CONTRACT, trace.read_text()), "slurm-1.out") == []


def test_the_traces_are_there_and_one_holds_the_warning_that_used_to_fire(rs: RuleSet) -> None:
    assert len(TRACES) == 4
    bring_up = next(p for p in TRACES if "gcs-warning" in p.name).read_text()
    assert GCS_WARNING.split("] ")[1] in bring_up
    assert [r for r, _ in decided(rs, bring_up, "slurm-1.out")] == ["ray-startup-failed"]  # unfiltered


def test_slurms_own_messages_in_a_trace_still_reach_the_rules(rs: RuleSet) -> None:
    trace = (
        "+ srun --overlap ray status\nslurmstepd-node3: error: Detected 1 oom_kill event in StepId=4242.0."
    )
    assert [r for r, _ in decided(rs, as_rules_see_it(nemo_rl.CONTRACT, trace), "slurm-1.out")] == [
        "host-oom"
    ]


def test_the_same_warning_is_a_failed_start_in_a_driver_log_or_our_launchers_output(rs: RuleSet) -> None:
    assert [r for r, _ in decided(rs, GCS_WARNING, "ray-driver.log")] == ["ray-startup-failed"]
    ours = as_rules_see_it(shepherd.CONTRACT, GCS_WARNING)
    assert [r for r, _ in decided(rs, ours, "slurm-1.out")] == ["ray-startup-failed"]
