"""Daemon settings: defaults < TOML file < SHEPHERD_* environment < explicit values.

The root folder holds everything the daemon owns (queue/, runs/, rejected/,
state/), so one `--root` is enough to run a second, independent instance.
Settings are checked like specs: an unknown key is an error, and every problem
names its line in shepherd.toml or its SHEPHERD_* variable (`SettingsError`).
"""

from __future__ import annotations

import difflib
import json
import os
import tomllib
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict
from pydantic_settings import SettingsError as EnvParseError

from supervisor.domain.envfiles import read_private_env_file
from supervisor.domain.notices import Level
from supervisor.domain.spec import MAX_SPEC_BYTES
from supervisor.domain.tomlpos import KeyPath, nearest_line, parse_toml, syntax_error_at


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
    token_file: Path | None = Field(
        default=None,
        description="a private (mode 600) KEY=VALUE file holding the tokens under the *_env names "
        "(SLACK_BOT_TOKEN=xoxb-...); read before the environment. A Slurm-hosted daemon needs it",
    )
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
        if self.token_file is not None:  # raises EnvFileError (located) when not private to this user
            found = read_private_env_file(self.token_file).get(env_name)
            if found:
                return found
        env = os.environ if environ is None else environ
        return env.get(env_name) or None

    def secret_env_names(self) -> tuple[str, ...]:
        """The variables the daemon reads its Slack secrets from: never passed on to a job."""
        return (self.bot_token_env, self.app_token_env, self.signing_secret_env, self.webhook_url_env)

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


def default_root() -> Path:
    env = os.environ.get("SHEPHERD_ROOT")
    if env:
        return Path(env)
    return Path(os.environ.get("XDG_STATE_HOME", Path.home() / ".local" / "state")) / "shepherd"


class SlurmSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    command_timeout_s: float = 30.0
    poll_interval_s: float = Field(
        default=10.0, description="poll cadence while some run is starting or failing"
    )
    steady_poll_interval_s: float = Field(default=60.0, description="cadence when every run is steady")
    idle_poll_interval_s: float = Field(default=120.0, description="cadence when nothing is tracked")
    unknown_grace_s: float = Field(
        default=600.0, description="how long a job missing from Slurm is 'unknown'"
    )
    blind_alert_after_s: float = 300.0
    bin_dir: Path | None = Field(default=None, description="where sbatch/squeue live, if not on PATH")


class WatchSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    poll_interval_s: float = Field(
        default=2.0, gt=0, description="a polled file that changed at its last check is looked at this often"
    )
    force_polling: bool = False
    poll_budget_ops_per_s: float = Field(
        default=100.0,
        gt=0,
        description="polling on a shared filesystem makes at most this many metadata operations per second "
        "(opens, listings), whatever the number of runs: a polite tenant of one login node",
    )
    poll_max_interval_s: float = Field(
        default=30.0, gt=0, description="the longest a quiet polled file waits between two looks"
    )
    ended_overdue_s: float = Field(
        default=600.0,
        gt=0,
        description="RUNNING this long after the launcher's 'driver exited' line without ENDED: "
        "`ended-not-written` fires",
    )

    @model_validator(mode="after")
    def _max_not_below_base(self) -> WatchSettings:
        if self.poll_max_interval_s < self.poll_interval_s:
            raise ValueError(
                f"watch.poll_max_interval_s ({self.poll_max_interval_s}) is below watch.poll_interval_s "
                f"({self.poll_interval_s}): a quiet file cannot be looked at more often than a busy one"
            )
        return self


class MetricsSettings(BaseModel):
    """The daemon's state in Prometheus' format: an HTTP endpoint, a file for node_exporter, or both."""

    model_config = ConfigDict(extra="forbid")

    port: int | None = Field(
        default=None,
        ge=0,
        le=65535,
        description="serve /metrics on this port (0: any free one); off when unset",
    )
    host: str = Field(default="127.0.0.1", description="the endpoint's address: loopback unless you mean it")
    textfile: Path | None = Field(
        default=None,
        description="write the metrics here for node_exporter's textfile collector (a `.prom` file in its "
        "--collector.textfile.directory); off when unset",
    )
    textfile_interval_s: float = Field(default=15.0, gt=0, description="how often the textfile is rewritten")
    max_run_series: int = Field(
        default=50, ge=0, description="per-run gauges for at most this many active runs (newest first)"
    )
    goodput_refresh_s: float = Field(
        default=60.0, gt=0, description="a run's goodput is recomputed this often"
    )

    @field_validator("textfile")
    @classmethod
    def _prom_suffix(cls, v: Path | None) -> Path | None:
        if v is not None and v.suffix != ".prom":
            raise ValueError(f"{v}: node_exporter's textfile collector reads only files ending in .prom")
        return v

    @property
    def enabled(self) -> bool:
        return self.port is not None or self.textfile is not None


class LeaseSettings(BaseModel):
    """One active daemon per root (supervisor/lease): how fast a standby takes over a silent holder."""

    model_config = ConfigDict(extra="forbid")

    ttl_s: float = Field(
        default=60.0, gt=0, description="a standby takes over after the holder is silent this long"
    )
    renew_every_s: float = Field(default=10.0, gt=0, description="the holder renews this often")
    margin_s: float = Field(
        default=5.0, ge=0, description="the holder stops acting this long before a standby could take over"
    )
    request_wait_s: float = Field(
        default=60.0,
        gt=0,
        description="a CLI command (cancel, hold, resume...) waits this long for the daemon that holds the "
        "lease to answer it",
    )


class PreflightSettings(BaseModel):
    """Checks of a spec against the cluster before it is queued (supervisor/preflight)."""

    model_config = ConfigDict(extra="forbid")

    at_intake: bool = Field(
        default=True, description="the daemon checks claimed specs too, not only `submit`"
    )
    timeout_s: float = Field(default=10.0, gt=0, description="preflight never takes longer than this")
    test_only: bool = Field(
        default=True, description="ask `sbatch --test-only` whether Slurm accepts the job"
    )
    shared_paths: list[Path] = Field(
        default_factory=list,
        description="paths the compute nodes see although statfs calls them local (a bind mount of a shared "
        "filesystem; a cluster whose nodes are this machine needs none: preflight asks Slurm)",
    )


class ForensicsSettings(BaseModel):
    """Evidence taken from a hung job's nodes before it is cancelled (act/forensics.py)."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(default=True, description="capture stacks before a stall's cancel")
    timeout_s: float = Field(
        default=30.0, gt=0, le=600, description="per node, all nodes at once; then the decision goes ahead"
    )
    on_failures: bool = Field(
        default=True,
        description="also capture when a failure rule (an OOM, an NCCL error...) ends a job whose processes "
        "still run, within `failure_timeout_s`",
    )
    failure_timeout_s: float = Field(
        default=10.0,
        gt=0,
        le=600,
        description="the cheaper bound for a failure's capture: the job is dying anyway, the resume waits",
    )


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="SHEPHERD_", env_nested_delimiter="__", extra="forbid")

    root: Path = Field(default_factory=default_root)
    config_file: Path | None = None
    max_spec_bytes: int = MAX_SPEC_BYTES
    spec_settle_s: float = Field(
        default=0.3, description="a queued file must be unchanged this long before claiming"
    )
    rules_dirs: list[Path] = Field(default_factory=list)
    slurm: SlurmSettings = Field(default_factory=SlurmSettings)
    watch: WatchSettings = Field(default_factory=WatchSettings)
    forensics: ForensicsSettings = Field(default_factory=ForensicsSettings)
    python: Path | None = Field(
        default=None, description="interpreter whose bin/ goes first on the job's PATH"
    )
    launch_script: Path | None = Field(
        default=None, description="sbatch script to use instead of the shipped ray.sub"
    )
    slack: SlackSettings = Field(default_factory=SlackSettings)
    metrics: MetricsSettings = Field(default_factory=MetricsSettings)
    lease: LeaseSettings = Field(default_factory=LeaseSettings)
    preflight: PreflightSettings = Field(default_factory=PreflightSettings)

    @model_validator(mode="after")
    def _lease_outlasts_a_command(self) -> Settings:
        """A fenced sbatch must finish (or be killed) before any standby can take the lease over."""
        usable = self.lease.ttl_s - self.lease.margin_s
        if usable <= self.slurm.command_timeout_s:
            raise ValueError(
                f"lease.ttl_s - lease.margin_s ({usable:g} s) must exceed slurm.command_timeout_s "
                f"({self.slurm.command_timeout_s:g} s), so a command started under the lease ends within it"
            )
        if self.lease.renew_every_s >= usable:
            raise ValueError("lease.renew_every_s must be shorter than lease.ttl_s - lease.margin_s")
        return self

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, env_settings, _TomlSource(settings_cls))

    @property
    def queue_dir(self) -> Path:
        return self.root / "queue"

    @property
    def runs_dir(self) -> Path:
        return self.root / "runs"

    @property
    def rejected_dir(self) -> Path:
        return self.root / "rejected"

    @property
    def state_dir(self) -> Path:
        return self.root / "state"

    @property
    def lease_dir(self) -> Path:
        return self.state_dir / "lease"

    @property
    def requests_dir(self) -> Path:
        """People's commands for the lease holder (act/mailbox.py): shared, like the lease."""
        return self.state_dir / "requests"

    @property
    def watch_load_path(self) -> Path:
        """The monitor's polling load (budget, demand, lag), for `shepherd status`."""
        return self.state_dir / "watch-load.json"

    @property
    def db_path(self) -> Path:
        return self.state_dir / "shepherd.sqlite3"

    def ensure_dirs(self) -> None:
        for d in (self.queue_dir, self.runs_dir, self.rejected_dir, self.state_dir):
            d.mkdir(parents=True, exist_ok=True)


class SettingsError(Exception):
    """Settings that cannot be used, one located problem a line: `<root>/shepherd.toml:4:
    slurm.poll_interval_s: should be a valid number`, or `$SHEPHERD_SLURM__POLL_INTERVAL_S: ...`."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


@dataclass(frozen=True, slots=True)
class SettingsFile:
    """shepherd.toml as read: its values and the line of each key (for located errors)."""

    path: Path
    data: dict[str, Any]
    lines: dict[KeyPath, int]


def settings_file_path(root: Path | str | None, config_file: Path | str | None) -> Path:
    """The settings file: `config_file` ($SHEPHERD_CONFIG_FILE) when given, else `<root>/shepherd.toml`."""
    if config_file:
        return Path(config_file)
    return (Path(root) if root else default_root()) / "shepherd.toml"


def read_settings_file(path: Path, *, required: bool = False) -> SettingsFile | None:
    """Parse a settings file, every problem located; None when there is none (and none was asked for)."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        if not required:
            return None
        raise SettingsError([f"{path}: no such file (named by $SHEPHERD_CONFIG_FILE)"]) from None
    except OSError as exc:
        raise SettingsError([f"{path}: cannot read: {exc.strerror or exc}"]) from exc
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise SettingsError([f"{path}:{line}: not UTF-8 text (byte {exc.start})"]) from exc
    try:
        data, lines = parse_toml(text)
    except tomllib.TOMLDecodeError as exc:
        at, reason = syntax_error_at(exc)
        raise SettingsError([f"{path}{f':{at}' if at else ''}: invalid TOML: {reason}"]) from exc
    return SettingsFile(path, data, lines)


class _TomlSource(PydanticBaseSettingsSource):
    """Reads `<root>/shepherd.toml`, or the file SHEPHERD_CONFIG_FILE names (then it must exist), below the
    environment: the root and config_file come from the sources above it (explicit values, SHEPHERD_*)."""

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        explicit = self.current_state.get("config_file")
        path = settings_file_path(self.current_state.get("root"), explicit)
        found = read_settings_file(path, required=bool(explicit))
        if found is None:
            return {}
        placed = [key for key in _NOT_IN_THE_FILE if key in found.data]
        if placed:  # the file is found through them: one set inside it would say another file is meant
            raise SettingsError(
                [
                    f"{path}:{found.lines.get((key,), 1)}: {key}: not allowed in the settings file "
                    f"(use {_NOT_IN_THE_FILE[key]})"
                    for key in placed
                ]
            )
        return found.data


_NOT_IN_THE_FILE = {"root": "--root or SHEPHERD_ROOT", "config_file": "SHEPHERD_CONFIG_FILE"}


def load_settings(root: Path | None = None, **overrides: Any) -> Settings:
    """The settings for `root` (default: $SHEPHERD_ROOT, else ~/.local/state/shepherd); raises `SettingsError`
    with every problem located, never pydantic's own error."""
    if root is not None:
        overrides["root"] = root
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        config = overrides.get("config_file") or _environ_value("SHEPHERD_CONFIG_FILE")
        path = settings_file_path(overrides.get("root") or _environ_value("SHEPHERD_ROOT"), config)
        raise SettingsError(_located(exc, read_settings_file(path))) from None
    except EnvParseError as exc:
        raise SettingsError(_unparsed_variables() or [f"SHEPHERD_* environment: {exc}"]) from None


_ENV_PREFIX = "SHEPHERD_"


def _environ_value(name: str) -> str | None:
    """A SHEPHERD_* variable as pydantic-settings reads it: whatever the case of its name."""
    return next((v for k, v in os.environ.items() if k.upper() == name), None)


def _shepherd_variables() -> dict[str, str]:
    """SHEPHERD_* variable names by the key path they set, lower-cased as pydantic-settings matches them."""
    return {k.lower(): k for k in os.environ if k.upper().startswith(_ENV_PREFIX)}


def _located(exc: ValidationError, file: SettingsFile | None) -> list[str]:
    """pydantic's errors as lines for people: where each value came from (the variable that set it, else its
    line in the file), the key path, and the reason."""
    variables = _shepherd_variables()
    out: list[str] = []
    for err in exc.errors():
        loc = tuple(str(p) for p in err["loc"])
        own = _own_variable(loc, variables)
        if own is not None:  # the environment beats the file: this value came from the variable
            where = [f"${own}"]
        else:  # a whole section: the variables that set keys in it, and the file's table
            inside = (_ENV_PREFIX + "__".join(loc) + "__").lower() if loc else None
            where = [f"${v}" for k, v in sorted(variables.items()) if inside and k.startswith(inside)]
            if file is not None and _in_file(file.data, loc):
                line = nearest_line(file.lines, loc)
                where.append(f"{file.path}:{line}" if line else str(file.path))
        field = ".".join(loc)
        reason = _reason(err, loc)
        if where:
            out.append(f"{', '.join(where)}: {field + ': ' if field else ''}{reason}")
        else:
            out.append(f"settings: {field + ': ' if field else ''}{reason}")
    return out


def _own_variable(loc: KeyPath, variables: dict[str, str]) -> str | None:
    """The SHEPHERD_* variable that set the value at `loc`: its own, or an enclosing table's given as JSON."""
    for depth in range(len(loc), 0, -1):
        name = (_ENV_PREFIX + "__".join(loc[:depth])).lower()
        if name in variables:
            return variables[name]
    return None


def _in_file(data: dict[str, Any], loc: KeyPath) -> bool:
    """Whether the file sets the first key of `loc` (the value, or the table it is in); a problem of the
    whole settings (loc ()) may come from anywhere, so the file is named too."""
    return not loc or loc[0] in data


def _reason(err: ErrorDetails, loc: KeyPath) -> str:
    if err["type"] == "extra_forbidden":
        known = _model_at(loc[:-1])
        close = difflib.get_close_matches(loc[-1], list(known.model_fields), n=1) if known else []
        return "unknown key (not allowed here)" + (f"; did you mean `{close[0]}`?" if close else "")
    msg = str(err["msg"])
    if err["type"] == "value_error":
        return msg.removeprefix("Value error, ")
    if msg.startswith("Input should"):
        return msg.removeprefix("Input ")
    return msg[:1].lower() + msg[1:]


def _model_at(path: Sequence[str]) -> type[BaseModel] | None:
    """The settings model (Settings or a section) at a key path, or None where the path leaves the models."""
    model: type[BaseModel] = Settings
    for part in path:
        field = model.model_fields.get(part)
        inner = _section(field.annotation) if field is not None else None
        if inner is None:
            return None
        model = inner
    return model


def _section(annotation: Any) -> type[BaseModel] | None:
    for candidate in (annotation, *get_args(annotation)):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def _field_at(path: Sequence[str]) -> FieldInfo | None:
    model = _model_at(path[:-1]) if path else None
    return model.model_fields.get(path[-1]) if model is not None else None


def _is_structured(annotation: Any) -> bool:
    """A list, a table or a section: what pydantic-settings reads from a variable as JSON."""
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType):
        return any(_is_structured(a) for a in get_args(annotation) if a is not type(None))
    return origin in (list, dict, set, tuple) or _section(annotation) is not None


def _unparsed_variables() -> list[str]:
    """The SHEPHERD_* variables pydantic-settings could not read: a list or a table written as anything but
    JSON."""
    out = []
    for key, name in sorted(_shepherd_variables().items()):
        path = key[len(_ENV_PREFIX) :].split("__")
        field = _field_at(path)
        if field is None or not _is_structured(field.annotation):
            continue
        try:
            json.loads(os.environ[name])
        except ValueError:
            example = '["/shared"]' if get_origin(field.annotation) is list else '{"key": "value"}'
            out.append(
                f"${name}: {'.'.join(path)}: not valid JSON (a list or table is given as JSON here, "
                f"e.g. {name}='{example}')"
            )
    return out
