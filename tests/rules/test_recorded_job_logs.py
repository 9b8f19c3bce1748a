"""The default rules on the job logs Slurm itself wrote, per recorded version (tests/data/slurm/*/joblog_*).

The lines slurmstepd adds to a job's output differ between versions (22.05 `Detected 1 oom-kill event(s) in
StepId=...`, 24.11 `Detected 1 oom_kill event in StepId=...`): the rules must read both.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from supervisor.rules.engine import MatcherState, RuleSet, load_ruleset
from supervisor.rules.replay import replay_text

DATA_ROOT = Path(__file__).parents[1] / "data" / "slurm"
VERSIONS = sorted(p.name for p in DATA_ROOT.iterdir() if p.is_dir()) if DATA_ROOT.is_dir() else []
per_version = pytest.mark.parametrize("data", [DATA_ROOT / v for v in VERSIONS], ids=VERSIONS)


@pytest.fixture(scope="module")
def rs() -> RuleSet:
    return load_ruleset()


def decided(rs: RuleSet, data: Path, name: str) -> list[str]:
    """The rules that decide on the recorded job log `name`, fed like the tailer feeds the Slurm log."""
    log = (data / f"{name}.txt").read_text()
    assert log.strip(), f"{data / name} is empty"
    out = replay_text(rs, log, "slurm.log", MatcherState(run_id="r1", attempt=1))
    return [m.rule for m in out if not m.followup]


@per_version
@pytest.mark.parametrize(
    ("name", "rules"),
    [
        ("joblog_oom_cgroup", ["host-oom"]),
        ("joblog_timeout", ["slurm-time-limit"]),
        ("joblog_cancel", []),  # a plain scancel: the state says CANCELLED, the log nothing more
        ("joblog_fail3", []),
    ],
)
def test_recorded_job_logs(rs: RuleSet, data: Path, name: str, rules: list[str]) -> None:
    assert decided(rs, data, name) == rules


@per_version
def test_an_oom_kill_without_cgroups_is_host_oom(rs: RuleSet, data: Path) -> None:
    assert decided(rs, data, "joblog_oom_nocgroup") == ["host-oom"]
