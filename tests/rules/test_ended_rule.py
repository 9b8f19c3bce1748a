"""`ended-not-written`: fires on the monitor's own line, never on a trainer's log saying the same words."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from supervisor.daemon.compose import build
from supervisor.daemon.monitor import ENDED_STALL_SOURCE, AttemptWatch
from supervisor.domain.jobstate import JobState
from supervisor.domain.spec import JobSpec
from supervisor.rules.engine import MatcherState, load_ruleset, scan_lines
from supervisor.settings import Settings, WatchSettings
from supervisor.slurm.launchers import nemo_rl

LINE = (
    "shepherd: ENDED not written 10 min after the driver exited while job 7 is RUNNING in /l/7-logs: "
    "a node's srun likely failed and the job idles until its time limit"
)


def test_the_monitor_line_resumes_from_latest() -> None:
    rs = load_ruleset()
    [m] = scan_lines(rs, MatcherState(run_id="r", attempt=1), [LINE], ENDED_STALL_SOURCE, 1, 1.0)
    assert m.rule == "ended-not-written" and m.category == "stall"
    assert [a.resume.from_ for a in m.actions if a.resume is not None] == ["latest"]


def test_the_same_words_in_the_driver_log_fire_nothing() -> None:
    rs = load_ruleset()
    assert scan_lines(rs, MatcherState(run_id="r", attempt=1), [LINE], "ray-driver.log", 1, 1.0) == []


def test_the_monitor_waits_for_the_ended_overdue_s_setting(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv("SHEPHERD_WATCH__ENDED_OVERDUE_S", "5")
    settings = Settings(root=tmp_path / "root")
    assert settings.watch.ended_overdue_s == 5.0
    assert WatchSettings().ended_overdue_s == 600.0
    monitor = build(settings).monitor
    logs = tmp_path / "logs" / "7-logs"
    logs.mkdir(parents=True)
    (logs / "STARTED_RAY_HEAD").touch()
    spec = JobSpec.model_validate({"name": "x", "command": ["echo"]})
    state = MatcherState(run_id="r", attempt=1, job_state=JobState.RUNNING)
    w = AttemptWatch("r", 1, "7", spec, load_ruleset(), state, tmp_path / "logs", driver_exited_at=100.0)
    assert monitor.check_ended(w, 104.0) == []
    [m] = monitor.check_ended(w, 105.0)
    assert m.rule == "ended-not-written" and "job 7 is RUNNING" in m.excerpt
    assert monitor.check_ended(w, 200.0) == []  # once per attempt


def test_nemo_rls_ended_marker_is_a_failed_bring_up_and_never_an_overdue_end(tmp_path: Path) -> None:
    """NeMo RL's launcher writes ENDED only when Ray did not come up (its file contract, nemo-rl-facts.md)."""
    monitor = build(Settings(root=tmp_path / "root")).monitor
    logs = tmp_path / "logs" / "8-logs"
    logs.mkdir(parents=True)
    (logs / "STARTED_RAY_HEAD").touch()
    state = MatcherState(run_id="r", attempt=1, job_state=JobState.RUNNING)
    w = AttemptWatch(
        "r", 1, "8", JobSpec.model_validate({"name": "x", "command": ["echo"]}), load_ruleset(), state,
        tmp_path / "logs", contract=nemo_rl.CONTRACT, driver_exited_at=100.0,
    )  # fmt: skip
    assert monitor.check_ended(w, 10_000.0) == []  # no driver-exit line is expected, so nothing is overdue
    (logs / "ENDED").touch()
    [m] = monitor.check_ended(w, 10_001.0)
    assert m.rule == "ray-startup-failed" and "bring-up failed" in m.excerpt
    assert monitor.check_ended(w, 10_002.0) == []  # once per attempt
