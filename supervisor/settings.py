"""Daemon settings: defaults < TOML file < SHEPHERD_* environment < explicit values.

The root folder holds everything the daemon owns (queue/, runs/, rejected/,
state/), so one `--root` is enough to run a second, independent instance.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from supervisor.slack.settings import SlackSettings


def default_root() -> Path:
    env = os.environ.get("SHEPHERD_ROOT")
    if env:
        return Path(env)
    return Path(os.environ.get("XDG_STATE_HOME", Path.home() / ".local" / "state")) / "shepherd"


class SlurmSettings(BaseModel):
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
    poll_interval_s: float = 2.0
    force_polling: bool = False
    ended_overdue_s: float = Field(
        default=600.0,
        gt=0,
        description="RUNNING this long after the launcher's 'driver exited' line without ENDED: "
        "`ended-not-written` fires",
    )


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="SHEPHERD_", env_nested_delimiter="__", extra="forbid")

    root: Path = Field(default_factory=default_root)
    config_file: Path | None = None
    max_spec_bytes: int = 256 * 1024
    spec_settle_s: float = Field(
        default=0.3, description="a queued file must be unchanged this long before claiming"
    )
    rules_dirs: list[Path] = Field(default_factory=list)
    slurm: SlurmSettings = Field(default_factory=SlurmSettings)
    watch: WatchSettings = Field(default_factory=WatchSettings)
    python: Path | None = Field(
        default=None, description="interpreter whose bin/ goes first on the job's PATH"
    )
    launch_script: Path | None = Field(
        default=None, description="sbatch script to use instead of the shipped ray.sub"
    )
    slack: SlackSettings = Field(default_factory=SlackSettings)

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
    def db_path(self) -> Path:
        return self.state_dir / "shepherd.sqlite3"

    def ensure_dirs(self) -> None:
        for d in (self.queue_dir, self.runs_dir, self.rejected_dir, self.state_dir):
            d.mkdir(parents=True, exist_ok=True)


class _TomlSource(PydanticBaseSettingsSource):
    """Reads `<root>/shepherd.toml` or SHEPHERD_CONFIG_FILE; a missing file is no error."""

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        explicit = os.environ.get("SHEPHERD_CONFIG_FILE")
        path = Path(explicit) if explicit else default_root() / "shepherd.toml"
        if not path.is_file():
            return {}
        with path.open("rb") as fh:
            return tomllib.load(fh)


def load_settings(root: Path | None = None, **overrides: Any) -> Settings:
    if root is not None:
        overrides["root"] = root
        toml = root / "shepherd.toml"
        if toml.is_file() and "SHEPHERD_CONFIG_FILE" not in os.environ:
            with toml.open("rb") as fh:
                file_values = tomllib.load(fh)
            file_values.update(overrides)
            overrides = file_values
    return Settings(**overrides)
