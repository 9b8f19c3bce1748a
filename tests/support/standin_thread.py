"""The Slack stand-in on its own asyncio loop in a background thread, for synchronous tests.

The daemon under test is a subprocess; the test drives Slack (slash commands, buttons, outages) from its
own thread through `call`, and reads what Slack received through `recorded` (a copy made on the loop).
"""

from __future__ import annotations

import asyncio
import copy
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from supervisor.testing.slack_standin import Recording, SlackStandin

T = TypeVar("T")


class StandinThread:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="slack-standin", daemon=True)
        self._standin: SlackStandin | None = None

    def start(self) -> StandinThread:
        self._thread.start()

        async def make() -> SlackStandin:
            return await SlackStandin().start()

        self._standin = self.call(make())
        return self

    @property
    def standin(self) -> SlackStandin:
        assert self._standin is not None, "start() first"
        return self._standin

    def call(self, coro: Coroutine[Any, Any, T], timeout: float = 30.0) -> T:
        """Run a coroutine on the stand-in's loop and wait for its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def recorded(self) -> Recording:
        async def snapshot() -> Recording:
            return copy.deepcopy(self.standin.rec)

        return self.call(snapshot())

    def stop(self) -> None:
        if self._standin is not None:
            self.call(self._standin.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()


def slack_env(standin: SlackStandin, channel: str, bot_token: str, app_token: str) -> dict[str, str]:
    """What a daemon under test needs to talk to the stand-in over Socket Mode, posting to `channel` and
    polling its outbox often (the tokens are test values the stand-in accepts)."""
    return {
        "SHEPHERD_SLACK__MODE": "socket",
        "SHEPHERD_SLACK__BASE_URL": standin.api_url,
        "SHEPHERD_SLACK__CHANNEL": channel,
        "SHEPHERD_SLACK__POLL_INTERVAL_S": "0.2",
        "SLACK_BOT_TOKEN": bot_token,
        "SLACK_APP_TOKEN": app_token,
    }


def wait_connected(slack: StandinThread, stop: Callable[[], object], log: Callable[[], str]) -> None:
    """Wait for the daemon to open Socket Mode; else `stop` it and fail with the end of its `log`."""
    try:
        slack.call(slack.standin.wait_connected(within=60), timeout=70)
    except Exception:
        stop()
        raise AssertionError(f"the daemon never opened Socket Mode:\n{log()[-3000:]}") from None
