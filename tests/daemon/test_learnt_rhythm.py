"""What a run's rhythm taught survives the daemon: a restarted daemon holds the run's next attempt to the
phases it learnt before, instead of going back to the fixed half-hour bound."""

from __future__ import annotations

import json
from pathlib import Path

from supervisor.daemon.compose import build
from supervisor.daemon.monitor import Monitor
from supervisor.rules.rhythm import Rhythm
from supervisor.settings import Settings

RUN = "toy-20260101-000000-abcd"


def test_a_restarted_daemon_holds_the_next_attempt_to_the_rhythm_learnt_before(tmp_path: Path) -> None:
    built = build(Settings(root=tmp_path / "root"))
    store = built.store
    store.create_run(RUN, "toy", json.dumps({"name": "toy", "command": ["true"]}), "spec.yaml")
    for n, job in ((1, "4242"), (2, "4243")):
        store.begin_attempt(RUN, lambda k: f"t{k}", {})
        store.attempt_submitted(RUN, n, job)
    run = store.get_run(RUN)
    first, second = store.get_attempt(RUN, 1), store.get_attempt(RUN, 2)
    assert run is not None and first is not None and second is not None

    before = Monitor(store, built.settings, built.actions, built.heartbeats)
    w = before.watch_for(run, first)
    assert w is not None and w.state.rhythms == {}
    w.state.rhythms["rollouts-stalled#0"] = Rhythm(
        samples={"generation": [58.0, 61.5, 60.2], "validation": [300.0]}
    )
    before.persist_progress(w)

    after = Monitor(store, built.settings, built.actions, built.heartbeats)  # the daemon restarted
    w2 = after.watch_for(run, second)
    assert w2 is not None
    assert w2.state.rhythms["rollouts-stalled#0"].samples == {
        "generation": [58.0, 61.5, 60.2],
        "validation": [300.0],
    }
    assert w2.state.rhythms["rollouts-stalled#0"].attempt == 0  # where attempt 1 was is not carried over
    snap = store.load_progress(RUN)
    assert snap is not None and "rollouts-stalled#0" in snap[2]["rhythm"]
