"""A run's reason is current: a new attempt clears why the last one stopped, and a reason that only repeats
the state (`COMPLETED — completed`) is not shown."""

from __future__ import annotations

from pathlib import Path

from supervisor.domain.runs import RunState, shown_reason
from supervisor.store import Store


def test_a_new_attempt_clears_the_last_ones_reason_and_a_reason_that_repeats_the_state_is_not_shown(
    tmp_path: Path,
) -> None:
    s = Store(tmp_path / "db.sqlite3")
    s.create_run("r1", "toy", "{}", "/x")
    s.begin_attempt("r1", lambda n: f"shep-r1-a{n}", {})
    s.set_run_state("r1", RunState.FAILED, reason="attempt 1 ended FAILED and no rule recognised the failure")
    s.set_run_state("r1", RunState.QUEUED, reason="resumed by alice")
    run = s.get_run("r1")
    assert run is not None and shown_reason(run) == "resumed by alice"
    s.begin_attempt("r1", lambda n: f"shep-r1-a{n}", {})
    run = s.get_run("r1")
    assert run is not None and run.final_reason is None and shown_reason(run) is None
    s.set_run_state("r1", RunState.COMPLETED, reason="completed")
    run = s.get_run("r1")
    assert run is not None and shown_reason(run) is None
