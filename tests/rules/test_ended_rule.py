"""`ended-not-written`: fires on the monitor's own line, never on a trainer's log saying the same words."""

from __future__ import annotations

from supervisor.monitor import ENDED_STALL_SOURCE
from supervisor.rules.engine import MatcherState, load_ruleset, scan_lines

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
