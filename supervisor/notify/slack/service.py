"""Slack from settings: the outbox (notifier + sender) first, then the command front end on top of it."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Callable, Mapping

import structlog
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.webhook.async_client import AsyncWebhookClient

from supervisor.domain.envfiles import EnvFileError
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


class SlackOutbox:
    """The notifier (synchronous: it only writes outbox rows) and the sender that delivers them.

    Built before anything that publishes, so the daemon's sinks exist before the command front end (which
    needs the run control, which publishes plots) is built.
    """

    def __init__(
        self,
        db: sqlite3.Connection,
        settings: SlackSettings,
        *,
        environ: Mapping[str, str] | None = None,
        clock: Callable[[], float] = time.time,
        run_state: Callable[[str], str | None] | None = None,
    ) -> None:
        self.db = db
        self.settings = settings
        try:
            add_known_secrets(settings.secrets(environ))
        except EnvFileError as exc:
            raise SlackConfigError(f"slack.token_file: {exc}") from None
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


class SlackService:
    """The outbox plus the command front end; `run()` is one task in the daemon's task group."""

    def __init__(
        self,
        outbox: SlackOutbox,
        control: RunControl,
        *,
        environ: Mapping[str, str] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        settings = outbox.settings
        self.settings = settings
        self.outbox = outbox
        self.notifier = outbox.notifier
        self.sender = outbox.sender
        self.handler: CommandHandler | None = None
        self.socket: SocketModeRunner | None = None
        self.http_app = None
        if outbox.web is not None and settings.mode in ("socket", "http"):
            policy = AuthPolicy.of(
                settings.authorised_users, settings.authorised_channels, settings.status_users
            )
            self.handler = CommandHandler(
                outbox.db, policy, control, self.notifier, WebResponder(outbox.web), clock=clock
            )
            if settings.mode == "socket":
                app_token = settings.resolved_app_token(environ)
                if not app_token:
                    raise SlackConfigError(
                        f"slack.mode=socket needs an app token (${settings.app_token_env})"
                    )
                self.socket = SocketModeRunner(
                    app_token, outbox.web, self.handler, ping_interval=settings.socket_ping_interval_s
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


def slack_service(
    db: sqlite3.Connection,
    settings: SlackSettings,
    control: RunControl,
    *,
    environ: Mapping[str, str] | None = None,
    clock: Callable[[], float] = time.time,
    run_state: Callable[[str], str | None] | None = None,
) -> SlackService:
    """Outbox and commands in one call, for a control that needs no sink of its own (tests, tools)."""
    outbox = SlackOutbox(db, settings, environ=environ, clock=clock, run_state=run_state)
    return SlackService(outbox, control, environ=environ, clock=clock)
