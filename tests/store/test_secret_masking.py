"""A line a job wrote can hold one of its secrets (its env_files or pass_env values); the store keeps
decisions and events with every registered secret value masked, and the rest of the line as it was."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from supervisor.redact import MASK, add_known_secrets, clear_known_secrets, mask_known
from supervisor.store import Store

KEY = "wandb-0123456789abcdef-secret"


@pytest.fixture
def known() -> Iterator[None]:
    add_known_secrets([KEY, "hf_ab"])  # hf_ab: shorter than redact's minimum, never masked
    yield
    clear_known_secrets()


def test_only_the_registered_values_are_masked(known: None) -> None:
    line = f"wandb: logging in with WANDB_API_KEY={KEY} (max_tokens=512, hf_ab)"
    assert mask_known(line) == f"wandb: logging in with WANDB_API_KEY={MASK} (max_tokens=512, hf_ab)"


def test_decisions_and_events_keep_no_registered_secret(tmp_path: Path, known: None) -> None:
    store = Store(tmp_path / "s.sqlite3")
    store.create_run("r-1", "r", '{"name": "r", "command": ["env"]}', str(tmp_path))
    store.record_decision(
        "r-1",
        1,
        rule="r",
        action="resume",
        signature="sig",
        reason=f"saw {KEY}",
        evidence={"lines": [f"Traceback: bad key {KEY}", "ok"], "match_line": KEY, "step": 3},
    )
    store.add_event("r-1", 1, "failed", f"failed with {KEY}", {"line": KEY})
    [d] = store.decisions("r-1")
    assert d.evidence["lines"] == [f"Traceback: bad key {MASK}", "ok"] and d.evidence["step"] == 3
    assert d.reason == f"saw {MASK}" and d.evidence["match_line"] == MASK
    store.close()
    assert KEY.encode() not in (tmp_path / "s.sqlite3").read_bytes()
    wal = tmp_path / "s.sqlite3-wal"
    assert not wal.exists() or KEY.encode() not in wal.read_bytes()
