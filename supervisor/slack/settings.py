"""Slack settings, embedded by the main settings as ``slack:`` (env ``SHEPHERD_SLACK__...``).

Tokens are `SecretStr` so they never show up in a repr or a log line; when a
token field is empty the conventional env variable named by ``*_env`` is read,
so an operator can keep ``SLACK_BOT_TOKEN`` in a 0600 env file for systemd.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr

Level = Literal["debug", "info", "warning", "error"]
LEVELS: dict[str, int] = {"debug": 10, "info": 20, "warning": 30, "error": 40}
SLACK_ID_PATTERN = r"^[A-Z0-9][A-Z0-9_]{1,30}$"


class SlackSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    mode: Literal["off", "socket", "http", "webhook"] = Field(
        default="off",
        description="socket: Web API + Socket Mode commands; http: Web API + request URL; "
        "webhook: incoming webhook, notifications only",
    )
    bot_token: SecretStr | None = None
    bot_token_env: str = "SLACK_BOT_TOKEN"
    app_token: SecretStr | None = Field(default=None, description="xapp- token, Socket Mode only")
    app_token_env: str = "SLACK_APP_TOKEN"
    signing_secret: SecretStr | None = Field(default=None, description="HTTP mode only")
    signing_secret_env: str = "SLACK_SIGNING_SECRET"
    webhook_url: SecretStr | None = None
    webhook_url_env: str = "SLACK_WEBHOOK_URL"
    base_url: str = Field(default="https://slack.com/api/", description="Web API root (tests: the stand-in)")

    channel: str | None = Field(default=None, description="default channel id for run threads")
    team_channels: dict[str, str] = Field(
        default_factory=dict, description="team name -> channel id, for specs that name a team"
    )
    level: Level = Field(default="info", description="events below this level are not posted")

    authorised_users: list[str] = Field(default_factory=list, description="Slack user ids allowed to act")
    authorised_channels: list[str] = Field(
        default_factory=list, description="if set, acting commands are accepted only from these channels"
    )
    status_users: list[str] = Field(
        default_factory=list, description="extra user ids allowed /status; '*' means everyone"
    )

    max_messages_per_run: int = Field(default=5, ge=1, description="per run per window; then one digest")
    rate_window_s: float = Field(default=60.0, gt=0)
    dedupe_window_s: float = Field(default=600.0, ge=0, description="same event for a run posted once")
    excerpt_chars: int = Field(default=2500, ge=200, le=2900)
    group_wait_s: float = Field(
        default=10.0, ge=0, description="an alert waits this long so related events join its message"
    )
    group_interval_s: float = Field(default=60.0, gt=0, description="at most one incident update per this")
    repeat_interval_s: float = Field(
        default=4 * 3600.0, gt=0, description="remind of an incident still needing a human"
    )
    resolve_after_s: float = Field(
        default=120.0, ge=0, description="a resumed attempt up this long without new trouble resolves"
    )

    retry_initial_s: float = Field(default=1.0, gt=0)
    retry_max_s: float = Field(default=60.0, gt=0)
    poll_interval_s: float = Field(default=1.0, gt=0, description="outbox poll when not woken")
    request_timeout_s: int = Field(default=15, ge=1)
    verify_in_flight: bool = Field(
        default=True,
        description="after a crash, look a half-sent message up (conversations.history) before resending",
    )
    socket_ping_interval_s: float = 5.0

    http_host: str = "127.0.0.1"
    http_port: int = 3000
    http_path: str = "/slack/events"

    def _secret(
        self, value: SecretStr | None, env_name: str, environ: Mapping[str, str] | None
    ) -> str | None:
        if value is not None and value.get_secret_value():
            return value.get_secret_value()
        env = os.environ if environ is None else environ
        return env.get(env_name) or None

    def resolved_bot_token(self, environ: Mapping[str, str] | None = None) -> str | None:
        return self._secret(self.bot_token, self.bot_token_env, environ)

    def resolved_app_token(self, environ: Mapping[str, str] | None = None) -> str | None:
        return self._secret(self.app_token, self.app_token_env, environ)

    def resolved_signing_secret(self, environ: Mapping[str, str] | None = None) -> str | None:
        return self._secret(self.signing_secret, self.signing_secret_env, environ)

    def resolved_webhook_url(self, environ: Mapping[str, str] | None = None) -> str | None:
        return self._secret(self.webhook_url, self.webhook_url_env, environ)

    def secrets(self, environ: Mapping[str, str] | None = None) -> list[str]:
        """Every configured secret, for `redact.add_known_secrets` at start-up."""
        vals = [
            self.resolved_bot_token(environ),
            self.resolved_app_token(environ),
            self.resolved_signing_secret(environ),
            self.resolved_webhook_url(environ),
        ]
        return [v for v in vals if v]

    def route(self, spec_channel: str | None, team: str | None = None) -> str | None:
        """Channel for a run: the spec's own channel, else its team's, else the default."""
        if spec_channel:
            return self.team_channels.get(spec_channel, spec_channel)
        if team and team in self.team_channels:
            return self.team_channels[team]
        return self.channel
