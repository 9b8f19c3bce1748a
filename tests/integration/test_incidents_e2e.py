"""Incidents end to end: a CUDA OOM that takes 50 NCCL/actor lines with it, on the real dev cluster, is one
incident in the run's Slack thread: the resume, the inhibited children folded in under their parent, and a
resolution when the resumed run completes.
The timing rules themselves: tests/notify/slack/test_incidents.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_slack_e2e import (  # noqa: F401 (module fixtures: this module's own daemon)
    FINAL,
    fake,
    in_thread,
    kind_of,
    slack,
    spec,
    sup,
    thread_ts,
    wait_message,
)
from tests.support.daemon import DaemonProcess
from tests.support.standin_thread import StandinThread

pytestmark = pytest.mark.slurm


def test_an_oom_and_the_50_lines_it_causes_are_one_incident_that_resolves(
    sup: DaemonProcess,  # noqa: F811
    slack: StandinThread,  # noqa: F811
    tmp_path: Path,
) -> None:
    name = "e2e-burst"
    path, _ = spec(tmp_path, name, fake(tmp_path, name, "oom-burst"))
    run = sup.submit(path)
    final = sup.wait_state(run, FINAL, timeout=120)
    assert final["state"] == "COMPLETED" and final["attempts"] == 2, final
    ts = thread_ts(sup, run)
    resolved = wait_message(slack, ts, lambda m: "Resolved" in m["text"], "the resolution")

    thread = in_thread(slack, ts)
    blob = [json.dumps(m.get("blocks"), ensure_ascii=False) + m["text"] for m in thread]
    kinds = [kind_of(m) for m in thread]
    # The OOM decided the incident; its children never got a message of their own.
    assert kinds.count("resumed") == 1 and "alert" not in kinds, kinds
    assert not any("Watchdog caught collective" in b or "ActorDiedError" in b for b in blob)
    suppressed = [b for b in blob if "suppressed: caused by cuda-oom" in b]
    assert len(suppressed) == 1, blob
    assert "nccl-error" in suppressed[0] and "ray-actor-died" in suppressed[0]
    # ... and it closed when the resumed attempt completed, after everything else.
    assert thread[-1] is resolved or thread.index(resolved) > kinds.index("completed")
    assert "cuda-oom" in resolved["text"]
    # The whole story stays short: resume, resubmission, start, completion, the folded update, resolution.
    assert len(thread) <= 7, kinds
    # The store kept every follow-up as evidence, without acting on it.
    decisions: list[dict[str, Any]] = sup.status(run)["decisions"]
    followups = [
        d for d in decisions if str(d.get("outcome", "")).startswith("followup") or d["action"] == "none"
    ]
    assert {d["rule"] for d in followups} >= {"nccl-error", "ray-actor-died"}, decisions
