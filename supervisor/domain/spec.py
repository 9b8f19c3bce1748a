"""The job spec: what a user drops into the queue folder.

Every field is validated up front (unknown keys are errors) so a typo is
reported at submission time, with its line, instead of as a failed job hours
later. Values never reach a shell: the command is an argv list, or a string
that is handed to ``bash -c`` as a single argv element inside the job.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from supervisor.domain.envfiles import ENV_KEY_RE, EnvFileError, read_private_env_file
from supervisor.domain.yamlpos import FieldError, YamlDocumentError, load_yaml_model

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
# Slurm time formats: minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS, or UNLIMITED.
TIME_RE = re.compile(r"^(UNLIMITED|INFINITE|\d+|\d+:\d{1,2}|\d+:\d{1,2}:\d{1,2}|\d+-\d+(:\d{1,2}){0,2})$")
MEM_RE = re.compile(r"^\d+[KMGT]?$")
# sbatch options we set ourselves; a spec may not override them through extra_args.
RESERVED_SBATCH = ("--job-name", "-J", "--comment", "--output", "-o", "--error", "-e", "--parsable", "--wrap")

MAX_SPEC_BYTES = 256 * 1024
DEADLINE_AUTO = "auto"
NEMO_RL_DEADLINE_ARG = "checkpointing.checkpoint_must_save_by={deadline}"
# NeMo RL resumes from the highest step_N in checkpointing.checkpoint_dir: pointing it at a staged dir is how
# shepherd makes it start from another step (the default `resume.checkpoint_dir_arg` of the nemo-rl launcher).
CHECKPOINT_DIR_KEY = "checkpointing.checkpoint_dir="
LOG_DIR_KEY = "logger.log_dir="
NEMO_RL_CHECKPOINT_DIR_ARG = CHECKPOINT_DIR_KEY + "{checkpoint_dir}"
CHECKPOINT_DIR_ENV = "SHEPHERD_CHECKPOINT_DIR"
# The spec's paths that may be written relative to the spec file's folder (resolved at submission).
RELATIVE_PATHS = ("log_dir", "trainer_log_dir", "shared_cache_dir", "model_dir")
RELATIVE_NESTED = (("launcher", "script"), ("checkpoint", "dir"))
RELATIVE_LISTS = (("rules", "files"), ("", "env_files"))  # "": at the top level


def command_value(command: list[str] | str, key: str) -> str | None:
    """The value of the last `key=value` override in a command (argv or shell string), or None: not there,
    or a string the shell would expand (a `$VAR`), which only the job knows."""
    if isinstance(command, str):
        try:
            words = shlex.split(command)
        except ValueError:
            return None
    else:
        words = list(command)
    found = [w[len(key) :] for w in words if w.startswith(key)]
    if not found or (isinstance(command, str) and "$" in found[-1]):
        return None
    return found[-1]


def _absolute(value: Any, base: Path) -> Any:
    """`value` joined to `base` when it is a relative path string; anything else as it is."""
    if isinstance(value, str) and value and not value.startswith(("/", "~")):
        return os.path.normpath(base / value)
    return value


def resolve_relative(data: Any, base: Path) -> Any:
    """The raw spec with every relative path of `RELATIVE_*` joined to `base` (the spec file's folder)."""
    if not isinstance(data, Mapping):
        return data
    out = dict(data)
    for key in RELATIVE_PATHS:
        if key in out:
            out[key] = _absolute(out[key], base)
    for section, key in RELATIVE_NESTED:
        inner = out.get(section)
        if isinstance(inner, Mapping) and key in inner:
            out[section] = {**inner, key: _absolute(inner[key], base)}
    for section, key in RELATIVE_LISTS:
        holder = out.get(section) if section else out
        if isinstance(holder, Mapping) and isinstance(holder.get(key), list):
            fixed = {**holder, key: [_absolute(v, base) for v in holder[key]]}
            if section:
                out[section] = fixed
            else:
                out = fixed
    return out


def _spec_base(info: ValidationInfo, data: Mapping[str, Any]) -> Path | None:
    """Where a spec's relative paths start: the spec file's folder (`shepherd submit`), else, for a file
    dropped into the queue, its absolute `workdir`; None: relative paths stay and are refused."""
    ctx = info.context if isinstance(info.context, Mapping) else {}
    if ctx.get("base") is not None:
        return Path(ctx["base"])
    workdir = data.get("workdir")
    return Path(workdir) if isinstance(workdir, str) and workdir.startswith("/") else None


def _job_path(value: str, info: ValidationInfo) -> str | None:
    """A path from the command as the job sees it: relative ones start in its workdir (None: unknown)."""
    if value.startswith("/"):
        return os.path.normpath(value)
    ctx = info.context if isinstance(info.context, Mapping) else {}
    cwd = info.data.get("workdir") or ctx.get("cwd")
    return os.path.normpath(Path(cwd) / value) if cwd is not None and not value.startswith("~") else None


def _stated_once(
    info: ValidationInfo, spec_value: Any, key: str, spec_field: str
) -> tuple[str | None, str | None]:
    """(the command's value of `key` as a path, or None; a contradiction with the spec's, or None)."""
    command = info.data.get("command")
    if command is None or not info.context:
        return None, None
    raw = command_value(command, key)
    from_command = _job_path(raw, info) if raw else None
    if from_command is None or spec_value is None:
        return from_command, None
    if os.path.normpath(str(spec_value)) != from_command:
        return from_command, (
            f"{spec_field} is {spec_value} but the command says {key}{raw}: write it once (leave "
            f"{spec_field} out and shepherd takes the command's) or make them the same"
        )
    return from_command, None


def slurm_time_s(value: str) -> int | None:
    """Seconds in a Slurm time (minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS); None: unlimited/bad."""
    if not TIME_RE.fullmatch(value) or value in ("UNLIMITED", "INFINITE"):
        return None
    days, _, rest = value.rpartition("-")
    parts = [int(x) for x in rest.split(":")]
    if days:
        # D-HH, D-HH:MM, D-HH:MM:SS
        hh, mm, ss = [*parts, 0, 0][:3]
        return int(days) * 86400 + hh * 3600 + mm * 60 + ss
    if len(parts) == 1:
        return parts[0] * 60  # minutes
    if len(parts) == 2:
        return parts[0] * 60 + parts[1]  # MM:SS
    return parts[0] * 3600 + parts[1] * 60 + parts[2]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SlurmSpec(_Strict):
    account: str | None = None
    partition: str | None = None
    qos: str | None = None
    nodes: Annotated[int, Field(ge=1, le=4096)] = 1
    spare_nodes: Annotated[int, Field(ge=0, le=64)] = Field(
        default=0,
        description="nodes asked for beyond `nodes` (with --no-kill; the trainer is sized to `nodes`), so "
        "a GPU fault on a worker node restarts in place without it; needs resume.in_place "
        "(docs/policy.md, 'Spare nodes')",
    )
    gpus_per_node: Annotated[int, Field(ge=0, le=64)] = 0
    cpus: Annotated[int, Field(ge=1, le=1024, description="CPUs per node (one task per node)")] = 1
    mem: str | None = Field(default=None, description="memory per node, e.g. 16G")
    time: str | None = Field(default=None, description="time limit in Slurm's format, e.g. 04:00:00")
    signal: str | None = Field(default=None, description="--signal value, e.g. B:USR1@120")
    exclude: list[str] = Field(default_factory=list)
    extra_args: list[str] = Field(default_factory=list)

    @field_validator("account", "partition", "qos")
    @classmethod
    def _plain_word(cls, v: str | None) -> str | None:
        if v is not None and not re.fullmatch(r"[A-Za-z0-9_.,-]+", v):
            raise ValueError("only letters, digits and _ . , - are allowed")
        return v

    @field_validator("mem")
    @classmethod
    def _mem(cls, v: str | None) -> str | None:
        if v is not None and not MEM_RE.fullmatch(v):
            raise ValueError("expected a size like 4000, 16G or 512M")
        return v

    @field_validator("time")
    @classmethod
    def _time(cls, v: str | None) -> str | None:
        if v is not None and not TIME_RE.fullmatch(v):
            raise ValueError("expected a Slurm time like 30, 04:00:00 or 1-12:00:00")
        return v

    @field_validator("extra_args")
    @classmethod
    def _extra(cls, v: list[str]) -> list[str]:
        for arg in v:
            if not arg.startswith("-"):
                raise ValueError(f"{arg!r}: each extra arg must be one option like --constraint=a100")
            if arg.split("=", 1)[0] in RESERVED_SBATCH:
                raise ValueError(f"{arg!r}: this option is set by shepherd itself")
        return v


class ContainerSpec(_Strict):
    image: str
    mounts: list[str] = Field(default_factory=list)


class CheckpointSpec(_Strict):
    dir: Path
    metric: str | None = Field(default=None, description="e.g. val:accuracy or train:reward_mean")
    higher_is_better: bool = True
    keep_top_k: Annotated[int, Field(ge=1)] | None = None
    tune_interval: bool = Field(
        default=False,
        description="pass Young/Daly's interval (from measured saves and failures) to the next attempt as "
        "checkpointing.save_period, never orphaning a kept step (docs/policy.md)",
    )


class ResumeSpec(_Strict):
    max_attempts: Annotated[int, Field(ge=1, le=1000)] = 4
    backoff_s: Annotated[float, Field(ge=0)] = 60.0
    backoff_max_s: Annotated[float, Field(ge=0)] = 1800.0
    checkpoint: str = Field(default="latest", pattern=r"^(latest|best|step_\d+)$")
    unrecognised_after_progress: bool = Field(
        default=True,
        description="resume once from the latest checkpoint when an attempt ends FAILED, no rule recognised "
        "why, and it had saved a new checkpoint first (a second such failure without one waits for a human)",
    )
    pass_checkpoint: list[str] | None = Field(
        default=None,
        description="argv appended on resume, with {checkpoint}; null: the trainer resumes by itself",
    )
    checkpoint_dir_arg: list[str] | None = Field(
        default=None,
        description="argv pointing the trainer at a staged checkpoint dir, with {checkpoint_dir}; an argv "
        "element with the same `key=` prefix is replaced (checkpointing.checkpoint_dir={checkpoint_dir})",
    )
    deadline_arg: str | None = Field(
        default=DEADLINE_AUTO,
        description="the override that makes the trainer save and stop before Slurm's time limit, with "
        "{deadline} (DD:HH:MM:SS after start); `auto`: NeMo RL's checkpointing.checkpoint_must_save_by "
        "for the nemo-rl launcher, none for shepherd's; null: never",
    )
    deadline_margin: str = Field(
        default="00:10:00",
        description="how long before the time limit the trainer must have saved (at most a quarter of it)",
    )
    in_place: bool = Field(
        default=True,
        description="run the driver under Shepherd's job-side runner, so that a resume whose fix needs no "
        "other allocation restarts inside the running Slurm job (docs/policy.md, 'Restart in place'); "
        "false: every resume goes back through Slurm (scancel, sbatch)",
    )
    in_place_wait_s: int = Field(
        default=600,
        ge=0,
        le=86400,
        description="how long the runner waits for Shepherd's word after the driver exits; then the job ends "
        "with the driver's exit code",
    )

    @field_validator("deadline_arg")
    @classmethod
    def _has_deadline(cls, v: str | None) -> str | None:
        if v not in (None, DEADLINE_AUTO) and "{deadline}" not in v:
            raise ValueError("must contain {deadline}, e.g. checkpointing.checkpoint_must_save_by={deadline}")
        return v

    @field_validator("deadline_margin")
    @classmethod
    def _margin(cls, v: str) -> str:
        if slurm_time_s(v) is None:
            raise ValueError("expected a Slurm time like 10, 00:10:00 or 0-00:10:00")
        return v

    @field_validator("pass_checkpoint")
    @classmethod
    def _has_placeholder(cls, v: list[str] | None) -> list[str] | None:
        if v is not None and not any("{checkpoint}" in a for a in v):
            raise ValueError("must contain {checkpoint}, e.g. ['--resume-from', '{checkpoint}']")
        return v

    @field_validator("checkpoint_dir_arg")
    @classmethod
    def _has_dir_placeholder(cls, v: list[str] | None) -> list[str] | None:
        if v is not None and not any("{checkpoint_dir}" in a for a in v):
            raise ValueError(
                "must contain {checkpoint_dir}, e.g. ['checkpointing.checkpoint_dir={checkpoint_dir}']"
            )
        return v


def checkpoint_dir_args(launcher: str, resume: ResumeSpec) -> list[str] | None:
    """How to point the trainer at a staged checkpoint dir: the spec's `resume.checkpoint_dir_arg`, by
    default NeMo RL's `checkpointing.checkpoint_dir=` with the nemo-rl launcher."""
    if resume.checkpoint_dir_arg is not None:
        return list(resume.checkpoint_dir_arg)
    return [NEMO_RL_CHECKPOINT_DIR_ARG] if launcher == "nemo-rl" else None


def cannot_pick(command: list[str] | str, launcher: str, resume: ResumeSpec) -> str | None:
    """Why shepherd cannot make a trainer resume from a step other than its newest (None: it can): one that
    resumes by itself from its newest step (no `resume.pass_checkpoint`) that shepherd cannot point at a
    staged dir (no `resume.checkpoint_dir_arg`, not NeMo RL, no $SHEPHERD_CHECKPOINT_DIR in the command)."""
    if resume.pass_checkpoint is not None or checkpoint_dir_args(launcher, resume) is not None:
        return None
    words = [command] if isinstance(command, str) else command
    if any(CHECKPOINT_DIR_ENV in w for w in words):
        return None
    return (
        "this trainer resumes from the newest step in its checkpoint dir and shepherd has no way to "
        "point it at another: set resume.checkpoint_dir_arg (e.g. ['checkpointing.checkpoint_dir="
        "{checkpoint_dir}']) or resume.pass_checkpoint, or use $SHEPHERD_CHECKPOINT_DIR in the command"
    )


class LauncherSpec(_Strict):
    """The batch script a run's jobs go through, and so the files they write."""

    kind: Literal["shepherd", "nemo-rl"] = Field(
        default="shepherd", description="shepherd: our ray.sub; nemo-rl: NeMo RL's own ray.sub, unmodified"
    )
    script: Path | None = Field(default=None, description="NeMo RL's ray.sub (e.g. /shared/me/RL/ray.sub)")

    @model_validator(mode="after")
    def _script(self) -> LauncherSpec:
        if self.kind == "nemo-rl" and self.script is None:
            raise ValueError("launcher nemo-rl needs `script`: the path of NeMo RL's ray.sub")
        if self.script is not None and not self.script.is_absolute():
            raise ValueError("launcher.script must be an absolute path")
        return self


class RulesSpec(_Strict):
    use_default: bool = True
    files: list[Path] = Field(default_factory=list)
    disable: list[str] = Field(default_factory=list)


class NotifySpec(_Strict):
    slack_channel: str | None = None
    level: Literal["debug", "info", "warning", "error"] = "info"


class PreflightSpec(_Strict):
    skip: list[Literal["paths", "shared", "model", "writable", "container", "sbatch", "gres", "all"]] = Field(
        default_factory=list,
        description="checks you know better than (`shepherd submit --no-preflight` writes [all])",
    )


class JobSpec(_Strict):
    name: str
    command: list[str] | str
    workdir: Path | None = None
    env: dict[str, str] = Field(default_factory=dict)
    env_files: list[Path] = Field(
        default_factory=list,
        description="private KEY=VALUE files (mode 600) read at each submission into the job's environment; "
        "their values never enter the spec or the store",
    )
    pass_env: list[str] = Field(
        default_factory=list,
        description="names taken from the environment of the `shepherd submit` that queued the run (e.g. "
        "WANDB_API_KEY), kept for later attempts in a private file beside the run",
    )
    slurm: SlurmSpec = Field(default_factory=SlurmSpec)
    launcher: LauncherSpec = Field(default_factory=LauncherSpec)
    container: ContainerSpec | None = None
    log_dir: Path | None = Field(
        default=None, description="BASE_LOG_DIR: <log_dir>/<jobid>-logs/ is written there"
    )
    trainer_log_dir: Path | None = Field(
        default=None,
        description="the trainer's logger.log_dir: exp_NNN/{tensorboard,metrics.jsonl}, status.json; "
        "default: the command's logger.log_dir=",
        validate_default=True,
    )
    checkpoint: CheckpointSpec | None = None
    model_dir: Path | None = Field(
        default=None, description="a local model the job loads: preflight checks its config.json and weights"
    )
    preflight: PreflightSpec = Field(default_factory=PreflightSpec)
    resume: ResumeSpec = Field(default_factory=ResumeSpec)
    rules: RulesSpec = Field(default_factory=RulesSpec)
    notify: NotifySpec = Field(default_factory=NotifySpec)
    shared_cache_dir: Path | None = Field(
        default=None,
        description="shared storage for HF_HOME and friends, used by the hf-cache-not-shared fix",
    )

    @model_validator(mode="before")
    @classmethod
    def _relative_paths(cls, data: Any, info: ValidationInfo) -> Any:
        """Relative paths start in the spec file's folder (see `_spec_base`); only at submission."""
        if not info.context or not isinstance(data, Mapping):
            return data
        base = _spec_base(info, data)
        return resolve_relative(data, base) if base is not None else data

    @field_validator("checkpoint", mode="before")
    @classmethod
    def _checkpoint_dir_once(cls, v: Any, info: ValidationInfo) -> Any:
        """`checkpoint.dir` defaults to the command's `checkpointing.checkpoint_dir=`; both given, they
        agree."""
        if not isinstance(v, Mapping):
            return v
        from_command, clash = _stated_once(info, v.get("dir"), CHECKPOINT_DIR_KEY, "checkpoint.dir")
        if clash:
            raise ValueError(clash)
        if "dir" not in v and from_command is not None:
            return {**v, "dir": from_command}
        return v

    @field_validator("trainer_log_dir", mode="before")
    @classmethod
    def _log_dir_once(cls, v: Any, info: ValidationInfo) -> Any:
        """`trainer_log_dir` defaults to the command's `logger.log_dir=`; both given, they agree."""
        from_command, clash = _stated_once(info, v, LOG_DIR_KEY, "trainer_log_dir")
        if clash:
            raise ValueError(clash)
        return from_command if v is None else v

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not NAME_RE.fullmatch(v):
            raise ValueError(
                "1-63 characters: letters, digits, '.', '_' or '-', starting with a letter or digit"
            )
        return v

    @field_validator("command")
    @classmethod
    def _command(cls, v: list[str] | str) -> list[str] | str:
        if isinstance(v, str) and not v.strip():
            raise ValueError("must not be empty")
        if isinstance(v, list) and (not v or not v[0]):
            raise ValueError("must be a non-empty argv list")
        if any("\x00" in a for a in ([v] if isinstance(v, str) else v)):
            raise ValueError("must not contain NUL bytes")
        return v

    @field_validator("env")
    @classmethod
    def _env(cls, v: dict[str, str]) -> dict[str, str]:
        for key, value in v.items():
            if not ENV_KEY_RE.fullmatch(key):
                raise ValueError(f"{key!r} is not a valid environment variable name")
            if "\x00" in value:
                raise ValueError(f"{key}: value must not contain NUL bytes")
        return v

    @field_validator("env_files")
    @classmethod
    def _env_files(cls, v: list[Path]) -> list[Path]:
        for p in v:
            if not (p.is_absolute() or str(p).startswith("~")):
                raise ValueError(f"{p}: must be an absolute path (or start with ~)")
        return v

    @field_validator("pass_env")
    @classmethod
    def _pass_env(cls, v: list[str]) -> list[str]:
        for key in v:
            if not ENV_KEY_RE.fullmatch(key):
                raise ValueError(f"{key!r} is not a valid environment variable name")
        if len(set(v)) != len(v):
            raise ValueError("a name is listed twice")
        return v

    @model_validator(mode="after")
    def _pass_env_not_in_env(self) -> JobSpec:
        both = sorted(set(self.pass_env) & set(self.env))
        if both:
            raise ValueError(f"{', '.join(both)}: named in both env and pass_env; keep one")
        return self

    @model_validator(mode="after")
    def _paths_absolute(self) -> JobSpec:
        for label, p in (
            ("workdir", self.workdir),
            ("log_dir", self.log_dir),
            ("shared_cache_dir", self.shared_cache_dir),
            ("trainer_log_dir", self.trainer_log_dir),
            ("model_dir", self.model_dir),
        ):
            if p is not None and not p.is_absolute():
                raise ValueError(f"{label} must be an absolute path")
        if self.checkpoint is not None and not self.checkpoint.dir.is_absolute():
            raise ValueError("checkpoint.dir must be an absolute path")
        return self

    @model_validator(mode="after")
    def _spares_need_in_place(self) -> JobSpec:
        """A spare node is used only by a restart in place (the default; without one it would idle for
        nothing), and only where the launcher leaves a drained node out of Ray's cluster (ours; not NeMo RL's
        ray.sub)."""
        if self.slurm.spare_nodes and not self.resume.in_place:
            raise ValueError(
                "slurm.spare_nodes needs restart in place, which this spec turns off (resume.in_place: "
                "false): a spare is used only by a restart in place; drop spare_nodes or in_place: false"
            )
        if self.slurm.spare_nodes and self.launcher.kind == "nemo-rl":
            raise ValueError(
                "slurm.spare_nodes does not work with NeMo RL's ray.sub (main and v0.6.0): its worker loop "
                "starts Ray again on a drained node seconds later, and ends the job after its retries "
                "(docs/nemo-rl.md, 'Spare nodes')"
            )
        return self

    @model_validator(mode="after")
    def _nemo_rl_needs(self) -> JobSpec:
        """What NeMo RL's ray.sub cannot run without, said at submission instead of after the queue."""
        if self.launcher.kind != "nemo-rl":
            return self
        missing = [
            why
            for ok, why in (
                (self.slurm.account, "slurm.account (its steps run `srun -A $SLURM_JOB_ACCOUNT`)"),
                (self.slurm.partition, "slurm.partition (its steps run `srun -p $SLURM_JOB_PARTITION`)"),
                (self.container, "container.image (every step runs in a pyxis container)"),
                (
                    self.container and self.container.mounts,
                    "container.mounts (pyxis refuses an empty --container-mounts; mount the shared paths)",
                ),
            )
            if not ok
        ]
        if missing:
            raise ValueError("launcher nemo-rl needs " + "; ".join(missing))
        return self

    @field_validator("resume")
    @classmethod
    def _resume_point_reachable(cls, v: ResumeSpec, info: ValidationInfo) -> ResumeSpec:
        """A `resume.checkpoint` other than latest must be one shepherd can make the trainer load."""
        launcher = info.data.get("launcher")
        if not info.context or v.checkpoint == "latest" or "command" not in info.data or launcher is None:
            return v
        why = cannot_pick(info.data["command"], launcher.kind, v)
        if why:
            raise ValueError(f"resume.checkpoint {v.checkpoint}: {why}")
        return v

    @property
    def checkpoint_dir_args(self) -> list[str] | None:
        """How to point the trainer at a staged checkpoint dir (see `checkpoint_dir_args`)."""
        return checkpoint_dir_args(self.launcher.kind, self.resume)

    @property
    def cannot_pick_checkpoint(self) -> str | None:
        """Why shepherd cannot make this trainer resume from a step other than its newest (None: it can)."""
        return cannot_pick(self.command, self.launcher.kind, self.resume)

    @property
    def deadline_arg_template(self) -> str | None:
        """The deadline override to pass, `auto` resolved by launcher."""
        arg = self.resume.deadline_arg
        if arg == DEADLINE_AUTO:
            return NEMO_RL_DEADLINE_ARG if self.launcher.kind == "nemo-rl" else None
        return arg

    def argv(self) -> list[str]:
        """The driver's argv inside the job: a string command runs under bash -c, as one argument."""
        return ["bash", "-c", self.command] if isinstance(self.command, str) else list(self.command)


def load_spec(
    path: Path, text: str | None = None, *, base: Path | None = None, cwd: Path | None = None
) -> JobSpec:
    """Load and validate a spec file (at most `MAX_SPEC_BYTES`); raises `YamlDocumentError` with located
    errors, OSError when it cannot be read.

    A submission's checks apply: relative paths start in `base` (`shepherd submit`: the spec file's folder;
    None: the spec's own `workdir`, for a file dropped into the queue), a path written in both the spec and
    the command must agree, `cwd` is the job's folder when the spec names no workdir."""
    if text is None:
        with path.open("rb") as fh:
            raw = fh.read(MAX_SPEC_BYTES + 1)
        if len(raw) > MAX_SPEC_BYTES:
            raise YamlDocumentError(
                [FieldError(str(path), None, "", f"too large: over {MAX_SPEC_BYTES} bytes")]
            )
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise YamlDocumentError(
                [FieldError(str(path), None, "", f"not UTF-8 text (byte {exc.start})")]
            ) from exc
    return load_yaml_model(JobSpec, path, text, context={"base": base, "cwd": cwd})


def spec_yaml(spec: JobSpec, source: Path) -> str:
    """The spec as the queue keeps it: what the user wrote, with relative paths made absolute and paths taken
    from the command filled in (so the daemon and later attempts never depend on a working folder)."""
    data = spec.model_dump(mode="json", exclude_unset=True)
    head = f"# {source}, as `shepherd submit` read it: relative paths resolved against its folder\n"
    return head + yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=1000)


def check_spec_files(spec: JobSpec) -> list[str]:
    """Problems with the files a spec names, found before anything is submitted."""
    problems = []
    if spec.workdir is not None and not spec.workdir.is_dir():
        problems.append(f"workdir: {spec.workdir} does not exist or is not a directory")
    for rules_file in spec.rules.files:
        if not rules_file.is_file():
            problems.append(f"rules.files: {rules_file} does not exist")
    argv0 = spec.argv()[0]
    if "/" in argv0 and not Path(argv0).exists():
        problems.append(f"command: {argv0} does not exist")
    for env_file in spec.env_files:
        try:
            read_private_env_file(env_file)
        except EnvFileError as exc:
            problems.append(f"env_files: {exc}")
    return problems
