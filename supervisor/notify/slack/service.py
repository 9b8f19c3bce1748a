"""Wiring for the daemon: one call builds the notifier, sender and command front end from settings."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Callable, Mapping

import structlog
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.webhook.async_client import AsyncWebhookClient

from supervisor.notify.slack import http_mode
from supervisor.notify.slack.commands import AuthPolicy
from supervisor.notify.slack.handler import CommandHandler, WebResponder
from supervisor.notify.slack.notifier import Notifier, OutboxSender
from supervisor.notify.slack.socket import SocketModeRunner
from supervisor.notify.slack.transport import Transport, WebApiTransport, WebhookTransport
from supervisor.ports import RunControl
from supervisor.redact import add_known_secrets
from supervisor.settings import SlackSettings

log = structlog.get_logger(__name__)


class SlackConfigError(Exception):
    """Slack is switched on but a token/URL it needs is missing."""


class SlackService:
    """`notifier` for the daemon's synchronous calls; `run()` as one task in the daemon's task group."""

    def __init__(
        self,
        db: sqlite3.Connection,
        settings: SlackSettings,
        control: RunControl,
        *,
        environ: Mapping[str, str] | None = None,
        clock: Callable[[], float] = time.time,
        run_state: Callable[[str], str | None] | None = None,
    ) -> None:
        self.settings = settings
        add_known_secrets(settings.secrets(environ))
        self.web: AsyncWebClient | None = None
        transport: Transport
        if settings.mode == "webhook":
            url = settings.resolved_webhook_url(environ)
            if not url:
                raise SlackConfigError(
                    f"slack.mode=webhook needs slack.webhook_url or ${settings.webhook_url_env}"
                )
            transport = WebhookTransport(
                AsyncWebhookClient(url, timeout=settings.request_timeout_s, retry_handlers=[])
            )
        else:
            token = settings.resolved_bot_token(environ)
            if not token:
                raise SlackConfigError(
                    f"slack.mode={settings.mode} needs a bot token (${settings.bot_token_env})"
                )
            self.web = AsyncWebClient(
                token=token, base_url=settings.base_url, timeout=settings.request_timeout_s, retry_handlers=[]
            )
            transport = WebApiTransport(self.web, verify_in_flight=settings.verify_in_flight)
        self.notifier = Notifier(db, settings, clock=clock, run_state=run_state)
        self.sender = OutboxSender(db, transport, settings, notifier=self.notifier, clock=clock)
        self.handler: CommandHandler | None = None
        self.socket: SocketModeRunner | None = None
        self.http_app = None
        self._app_token: str | None = None
        if self.web is not None and settings.mode in ("socket", "http"):
            policy = AuthPolicy.of(
                settings.authorised_users, settings.authorised_channels, settings.status_users
            )
            self.handler = CommandHandler(
                db, policy, control, self.notifier, WebResponder(self.web), clock=clock
            )
            if settings.mode == "socket":
                app_token = settings.resolved_app_token(environ)
                if not app_token:
                    raise SlackConfigError(
                        f"slack.mode=socket needs an app token (${settings.app_token_env})"
                    )
                self.socket = SocketModeRunner(
                    app_token, self.web, self.handler, ping_interval=settings.socket_ping_interval_s
                )
            else:
                secret = settings.resolved_signing_secret(environ)
                if not secret:
                    raise SlackConfigError(
                        f"slack.mode=http needs a signing secret (${settings.signing_secret_env})"
                    )
                self.http_app = http_mode.make_app(secret, self.handler, path=settings.http_path, clock=clock)

    async def run(self) -> None:
        """Deliver the outbox and serve commands until cancelled."""
        async with asyncio.TaskGroup() as tg:
            tg.create_task(self.sender.run())
            if self.socket is not None:
                tg.create_task(self.socket.run())
            if self.http_app is not None:
                tg.create_task(
                    http_mode.serve(self.http_app, self.settings.http_host, self.settings.http_port)
                )


def build_slack(
    db: sqlite3.Connection,
    settings: SlackSettings,
    control: RunControl,
    *,
    environ: Mapping[str, str] | None = None,
    clock: Callable[[], float] = time.time,
    run_state: Callable[[str], str | None] | None = None,
) -> SlackService | None:
    """None when Slack is off. `run_state` (a run's state in the store) resolves incidents of ended runs."""
    if settings.mode == "off":
        return None
    return SlackService(db, settings, control, environ=environ, clock=clock, run_state=run_state)
