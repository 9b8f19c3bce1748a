"""The driver's command for one attempt: the spec's command plus the resume's arguments (a checkpoint, a
staged checkpoint dir, the save deadline), added the same way whether the command is an argv list or a
shell string, so `key=value` overrides land in the trainer's own arguments either way."""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence

from supervisor.domain.overrides import AttemptOverrides
from supervisor.domain.spec import JobSpec, slurm_time_s

Command = list[str] | str
MIN_DEADLINE_S = 60  # a deadline shorter than this could not even start a trainer: none is passed


def _key(arg: str) -> str | None:
    """`key=` of a Hydra-style override, or None for any other argument."""
    head, eq, _ = arg.partition("=")
    return head + eq if eq and head and not head.startswith("-") and " " not in head else None


def _key_token(key: str) -> re.Pattern[str]:
    """`key=...` as one shell word in a command string: bare (`key=v`) or quoted (`'key=v w'`)."""
    k = re.escape(key)
    return re.compile(rf"(?<![^\s])(?:'{k}[^']*'|\"{k}[^\"]*\"|{k}\S*)")


# The trainer's node count (NeMo RL's key, ours too): with spare nodes the job has more nodes than it uses.
NUM_NODES_KEY = "cluster.num_nodes="


def has_key(command: Command, key: str) -> bool:
    """Whether the command already sets `key=...` (the user's own value wins)."""
    if isinstance(command, str):
        return _key_token(key).search(command) is not None
    return any(a.startswith(key) for a in command)


def with_args(command: Command, args: Sequence[str]) -> Command:
    """`args` after the command; a `key=` already there is replaced (Hydra-style parsers refuse a repeat)."""
    if isinstance(command, str):
        out = command
        for arg in args:
            key = _key(arg)
            if key is not None and has_key(out, key):
                literal = shlex.quote(arg).replace("\\", "\\\\")  # a template: backslashes doubled
                out = _key_token(key).sub(literal, out, count=1)
            else:
                out = f"{out} {shlex.quote(arg)}"
        return out
    argv = list(command)
    for arg in args:
        key = _key(arg)
        at = next((i for i, a in enumerate(argv) if key is not None and a.startswith(key)), None)
        if at is None:
            argv.append(arg)
        else:
            argv[at] = arg
    return argv


def format_deadline(seconds: int) -> str:
    """NeMo RL's `DD:HH:MM:SS` (our trainer reads the same)."""
    d, rest = divmod(max(0, seconds), 86400)
    h, rest = divmod(rest, 3600)
    m, s = divmod(rest, 60)
    return f"{d:02d}:{h:02d}:{m:02d}:{s:02d}"


def save_deadline(spec: JobSpec) -> str | None:
    """When the trainer must have saved and stopped, from the job's time limit less the margin; None when the
    spec sets no time limit, no deadline argument, or the user passes one already."""
    template = spec.deadline_arg_template
    limit = slurm_time_s(spec.slurm.time) if spec.slurm.time else None
    if template is None or limit is None:
        return None
    if has_key(spec.command, template.split("{deadline}", 1)[0]):
        return None
    margin = min(slurm_time_s(spec.resume.deadline_margin) or 0, limit // 4)
    if limit - margin < MIN_DEADLINE_S:
        return None
    return format_deadline(limit - margin)


def driver_command(spec: JobSpec, overrides: AttemptOverrides) -> Command:
    """The spec's command with this attempt's checkpoint, staged dir, save deadline, tuned save period and,
    with spare nodes, the trainer's node count."""
    command: Command = spec.command if isinstance(spec.command, str) else list(spec.command)
    extra: list[str] = []
    if overrides.checkpoint and spec.resume.pass_checkpoint:
        extra += [a.replace("{checkpoint}", overrides.checkpoint) for a in spec.resume.pass_checkpoint]
    dir_args = spec.checkpoint_dir_args
    if overrides.checkpoint_dir and dir_args:
        extra += [a.replace("{checkpoint_dir}", overrides.checkpoint_dir) for a in dir_args]
    deadline = save_deadline(spec)
    template = spec.deadline_arg_template
    if deadline is not None and template is not None:
        extra.append(template.replace("{deadline}", deadline))
    if overrides.save_period is not None:  # checkpoint.tune_interval's period (NeMo RL's key, ours too)
        extra.append(f"checkpointing.save_period={overrides.save_period}")
    if spec.slurm.spare_nodes and not has_key(spec.command, NUM_NODES_KEY):
        extra.append(f"{NUM_NODES_KEY}{spec.slurm.nodes}")  # the job has N+K nodes, the trainer uses N
    return with_args(command, extra) if extra else command


def as_argv(command: Command) -> list[str]:
    """The command as argv: a string runs under `bash -c`, as one argument."""
    return ["bash", "-c", command] if isinstance(command, str) else list(command)


def as_shell(command: Command) -> str:
    """The command as one shell string (NeMo RL's COMMAND)."""
    return command if isinstance(command, str) else shlex.join(command)
