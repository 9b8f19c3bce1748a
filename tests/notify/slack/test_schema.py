"""The Slack tables live in the daemon's store and work on its connection, even inside its transactions."""

from __future__ import annotations

from pathlib import Path

import pytest

from supervisor.notify.slack.notifier import Notifier
from tests.notify.conftest import make_settings

store_mod = pytest.importorskip("supervisor.store", reason="the daemon's store is not there yet")


def test_the_store_migrates_the_slack_tables_and_the_notifier_uses_its_connection(tmp_path: Path) -> None:
    store = store_mod.Store(tmp_path / "state.db")
    try:
        tables = {r[0] for r in store.db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert {"slack_outbox", "slack_threads", "slack_commands", "slack_silences"} <= tables
        notifier = Notifier(store.db, make_settings())
        notifier.run_opened("a-1", "a", "", None)
        with store.tx():  # called from inside the daemon's own transaction: a savepoint, not a nested BEGIN
            assert notifier.event("a-1", "started", "running") is not None
        assert notifier.pending() == 2
    finally:
        store.close()


def test_a_failed_enqueue_inside_the_callers_transaction_leaves_nothing_behind(tmp_path: Path) -> None:
    store = store_mod.Store(tmp_path / "state.db")
    try:
        notifier = Notifier(store.db, make_settings())
        with pytest.raises(RuntimeError), store.tx():
            notifier.run_opened("a-1", "a", "", None)
            raise RuntimeError("the daemon's own step failed")
        assert notifier.pending() == 0 and notifier.thread("a-1") is None
    finally:
        store.close()
