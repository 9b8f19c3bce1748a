"""SIGHUP reloads; a bad new file keeps the old version, alerts, and never stops the daemon."""

from __future__ import annotations

import os
import signal
from typing import TYPE_CHECKING

import anyio
import pytest

from supervisor.service.reload import Reloader
from supervisor.service.sdnotify import Notifier

if TYPE_CHECKING:
    from .conftest import NotifyReceiver


class RulesHolder:
    """What the rules engine does: parse the whole new file, then swap; raise before swapping if bad."""

    def __init__(self) -> None:
        self.active = ["rule-v1"]
        self.next_file: str = "rule-v2"

    def load(self) -> None:
        if "bad" in self.next_file:
            raise ValueError(f"rules.yaml:3: unknown action {self.next_file!r}")
        self.active = [self.next_file]


@pytest.mark.anyio
async def test_a_good_reload_swaps_in_the_new_rules() -> None:
    rules = RulesHolder()
    result = await Reloader([("rules", rules.load)]).reload_now()
    assert result.all_ok
    assert rules.active == ["rule-v2"]


@pytest.mark.anyio
async def test_a_bad_file_keeps_the_old_rules_alerts_and_other_parts_still_reload() -> None:
    rules = RulesHolder()
    rules.next_file = "bad-action"
    settings_loaded: list[int] = []
    alerts: list[str] = []

    async def load_settings() -> None:
        settings_loaded.append(1)

    async def alert(text: str) -> None:
        alerts.append(text)

    reloader = Reloader([("rules", rules.load), ("settings", load_settings)], alert=alert)
    result = await reloader.reload_now()
    assert rules.active == ["rule-v1"]
    assert settings_loaded == [1]
    assert result.ok == ["settings"]
    assert "unknown action" in result.failed["rules"]
    assert len(alerts) == 1 and "rules" in alerts[0] and "unknown action" in alerts[0]


@pytest.mark.anyio
async def test_a_failing_alert_does_not_break_the_reload() -> None:
    def alert(_: str) -> None:
        raise ConnectionError("slack down")

    def broken() -> None:
        raise RuntimeError("bad")

    result = await Reloader([("rules", broken)], alert=alert).reload_now()
    assert result.failed == {"rules": "RuntimeError: bad"}


@pytest.mark.anyio
async def test_errors_in_alerts_are_redacted() -> None:
    alerts: list[str] = []

    def broken() -> None:
        raise ValueError("settings.toml: slack.bot_token = xoxb-1234-abcdefghijkl is invalid")

    await Reloader([("settings", broken)], alert=alerts.append).reload_now()
    assert "abcdefghijkl" not in alerts[0]


@pytest.mark.anyio
async def test_sighup_triggers_a_reload_and_systemd_sees_reloading_then_ready(
    notify_socket: NotifyReceiver,
) -> None:
    rules = RulesHolder()
    reloader = Reloader(
        [("rules", rules.load)],
        notifier=Notifier({"NOTIFY_SOCKET": notify_socket.address}),
        status=lambda: "runs 1 active, 0 pending, 0 failed",
    )
    async with anyio.create_task_group() as tg:
        await tg.start(reloader.run)
        os.kill(os.getpid(), signal.SIGHUP)
        with anyio.fail_after(10):
            while reloader.reloads == 0:  # noqa: ASYNC110 - the signal arrives asynchronously
                await anyio.sleep(0.01)
        tg.cancel_scope.cancel()
    assert rules.active == ["rule-v2"]
    assert notify_socket.wait_for(lambda m: len(m) == 2)
    reloading, ready = notify_socket.snapshot()
    assert reloading["RELOADING"] == "1" and int(reloading["MONOTONIC_USEC"]) > 0
    assert ready == {"READY": "1", "STATUS": "runs 1 active, 0 pending, 0 failed"}


@pytest.mark.anyio
async def test_status_after_a_failed_reload_says_so(notify_socket: NotifyReceiver) -> None:
    rules = RulesHolder()
    rules.next_file = "bad"
    reloader = Reloader([("rules", rules.load)], notifier=Notifier({"NOTIFY_SOCKET": notify_socket.address}))
    await reloader.reload_now()
    assert notify_socket.wait_for(lambda m: len(m) == 2)
    assert notify_socket.snapshot()[1] == {"READY": "1", "STATUS": "reload failed: rules"}
