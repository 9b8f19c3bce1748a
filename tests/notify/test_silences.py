"""Silences: one owner for what the CLI, Slack and `status` set and read."""

from __future__ import annotations

from pathlib import Path

from supervisor.notify.silences import Silences, targets
from supervisor.store import Store


def test_a_silence_covers_its_run_by_id_or_name_and_a_rule_everywhere(tmp_path: Path) -> None:
    now = [1000.0]
    s = Silences(Store(tmp_path / "s.db").db, clock=lambda: now[0])
    s.add("gsm8k", 600, "cli:alice")
    s.add("rule:nccl-error", 60, "U1")
    assert s.covers("gsm8k-20260101-0000-abcd", "gsm8k")
    assert not s.covers("other-run", "other")
    assert s.covers("other-run", "other", rule="nccl-error")
    now[0] += 120
    assert not s.covers("other-run", "other", rule="nccl-error")  # the rule's silence ended
    assert [x.target for x in s.active()] == ["gsm8k"]


def test_silencing_again_replaces_the_end_and_remove_lifts_it(tmp_path: Path) -> None:
    s = Silences(Store(tmp_path / "s.db").db, clock=lambda: 0.0)
    s.add("run-a", 10, "a")
    s.add("run-a", 3600, "b")
    (only,) = s.active()
    assert (only.until, only.actor) == (3600, "b")
    s.remove("run-a")
    assert s.active() == []


def test_targets_name_the_run_its_name_and_the_rule() -> None:
    assert targets("r-1", "r", "cuda-oom") == ["r-1", "r", "rule:cuda-oom"]
    assert targets("r-1") == ["r-1"]
