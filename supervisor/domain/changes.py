"""A person's changes to a run between attempts (`shepherd resume RUN --set KEY=VALUE`, Slack's `set`), as
data: parsed, applied to the run's spec and validated by the spec's own model, so a bad key is refused the
way a bad spec file is, and a secret never enters the spec, the store or a message through one.

Two forms: `KEY=VALUE` sets a spec field (`slurm.time=02:00:00`, `resume.max_attempts=6`,
`env.NCCL_DEBUG=INFO`; VALUE is read as YAML, so `6` is a number and `[a, b]` a list), and
`command+=OVERRIDE` appends a Hydra-style override to the run's command or replaces the one with the same
key (`command+=policy.train_micro_batch_size=1`); `command-=KEY` drops it.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from typing import Any

import yaml

from supervisor.domain.overrides import AttemptOverrides
from supervisor.domain.runs import AttemptRow, HistoryEntry
from supervisor.domain.spec import JobSpec
from supervisor.domain.yamlpos import FieldError, YamlDocumentError, validate_located
from supervisor.redact import MIN_SECRET_LEN, is_secret_key

# What a run is, or where its secrets come from: fixed for its life (a new run is a new submission).
FIXED_KEYS = {
    "name": "the run's name is fixed; submit a new run under another name",
    "env_files": "the secret sources are fixed for a run's life; change the files' contents instead",
    "pass_env": "the secret sources are fixed for a run's life (their values were taken at submission)",
    "env": "set one variable at a time: env.NAME=VALUE",
}
# The sbatch option a rule's fix may pass for a spec field: a person's later setting of the field drops it.
_SBATCH_OPTION = {
    "slurm.time": ("--time", "-t"),
    "slurm.mem": ("--mem",),
    "slurm.partition": ("--partition", "-p"),
    "slurm.account": ("--account", "-A"),
    "slurm.qos": ("--qos", "-q"),
    "slurm.nodes": ("--nodes", "-N"),
    "slurm.signal": ("--signal",),
    "slurm.gpus_per_node": ("--gres", "--gpus-per-node"),
}
_NUMBER = re.compile(r"[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?")
_OVERRIDE_KEY = re.compile(r"^(?:\+\+|\+|~)?([A-Za-z_][\w.@/-]*)(?:=|$)")


@dataclass(frozen=True, slots=True)
class SpecChange:
    """One field changed: `key` (`slurm.time`, `env.NCCL_DEBUG`, `command+policy.lr`), its value before and
    after (None: unset), as recorded in the run's history and shown by `status`."""

    key: str
    old: Any
    new: Any

    def describe(self) -> str:
        return f"{self.key}: {_show(self.old)} -> {_show(self.new)}"

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "old": self.old, "new": self.new}


def _show(value: Any) -> str:
    if value is None:
        return "(unset)"
    return value if isinstance(value, str) else json.dumps(value)


def apply_changes(
    spec: JobSpec,
    sets: Sequence[str],
    *,
    source: str = "--set",
    secret_names: Collection[str] = (),
    secret_values: Collection[str] = (),
) -> tuple[JobSpec, list[SpecChange]]:
    """The spec with every `KEY=VALUE` of `sets` applied, and what changed; `YamlDocumentError` (located at
    `source` and the key) for a malformed, unknown, invalid, fixed or secret one: all are refused together.

    `secret_names`: the run's variables whose values are secret (its env files' names, pass_env);
    `secret_values`: their values, which no change may carry (say, inside a command override)."""
    data = spec.model_dump(mode="json")
    changes: list[SpecChange] = []
    errors: list[FieldError] = []
    secrets = [v for v in secret_values if len(v) >= MIN_SECRET_LEN]
    for text in sets:
        key, sep, raw = text.partition("=")
        key = key.strip()
        if not sep or not key:
            errors.append(FieldError(source, None, text if not sep else "", "expected KEY=VALUE"))
            continue
        if any(s in raw for s in secrets):
            errors.append(
                FieldError(source, None, key, "carries a secret value; secrets stay in their files")
            )
            continue
        try:
            if key in ("command+", "command-"):
                changes.append(_command_change(data, key, raw))
            else:
                refused = _refusal(key, secret_names)
                if refused:
                    errors.append(FieldError(source, None, key, refused))
                    continue
                changes.append(_field_change(data, key, raw))
        except ValueError as exc:
            errors.append(FieldError(source, None, key, str(exc)))
    try:
        new = validate_located(JobSpec, data, {}, source)
    except YamlDocumentError as exc:
        raise YamlDocumentError([*errors, *exc.errors]) from exc
    if errors:
        raise YamlDocumentError(errors)
    return new, [c for c in changes if c.old != c.new]


def _refusal(key: str, secret_names: Collection[str]) -> str | None:
    top, _, rest = key.partition(".")
    if key in FIXED_KEYS:
        return FIXED_KEYS[key]
    if top == "env" and rest and (is_secret_key(rest) or rest in secret_names):
        return "a secret variable: its value is never taken here; put it in an env file (env_files)"
    return None


def _field_change(data: dict[str, Any], key: str, raw: str) -> SpecChange:
    value = _yaml_value(raw)
    parts = key.split(".")
    node: Any = data
    for i, part in enumerate(parts[:-1]):
        if node.get(part) is None:
            node[part] = {}
        node = node[part]
        if not isinstance(node, dict):
            raise ValueError(f"{'.'.join(parts[: i + 1])} is a value, not a section")
    if parts[0] == "env" and value is not None:
        value = str(value)  # a variable's value is text (`env.X=1` means "1")
    old = node.get(parts[-1])
    if value is None and parts[0] == "env":
        node.pop(parts[-1], None)
    else:
        node[parts[-1]] = value
    return SpecChange(key, old, value)


def _yaml_value(raw: str) -> Any:
    """VALUE as YAML (`6`, `true`, `[a, b]`, empty: unset), except where YAML 1.1 would read a Slurm time or a
    date as a number or a timestamp (`4:00:00` is 14400 to it): that stays the text it is."""
    try:
        value = yaml.safe_load(raw) if raw.strip() else None
    except yaml.YAMLError as exc:
        raise ValueError(f"not a YAML value: {exc}") from exc
    if isinstance(value, bool | int | float) and not isinstance(value, bool):
        if not _NUMBER.fullmatch(raw.strip()):
            return raw.strip()
    elif value is not None and not isinstance(value, str | bool | list | dict):
        return raw.strip()
    return value


def override_key(arg: str) -> str | None:
    """The key a Hydra-style override sets (`++a.b=1` -> a.b), or None for anything else (a flag, a path)."""
    m = _OVERRIDE_KEY.match(arg)
    return m.group(1) if m and not arg.startswith("-") else None


def _command_change(data: dict[str, Any], key: str, raw: str) -> SpecChange:
    target = override_key(raw)
    if target is None or (key == "command+" and "=" not in raw):
        raise ValueError(f"{raw!r}: expected a Hydra-style override like policy.train_micro_batch_size=1")
    if is_secret_key(target.rsplit(".", 1)[-1]):
        raise ValueError(f"{target}: a secret-named setting is never taken here; put it in an env file")
    label = f"command+{target}"
    command = data["command"]
    if isinstance(command, list):
        at = [i for i, a in enumerate(command) if override_key(a) == target]
        old = command[at[0]] if at else None
        if key == "command-":
            data["command"] = [a for i, a in enumerate(command) if i not in at]
            return SpecChange(label, old, None)
        if at:
            command[at[0]] = raw
        else:
            command.append(raw)
        return SpecChange(label, old, raw)
    # A string command runs under bash -c: the override is one shell word there.
    word = re.compile(r"(?<!\S)(?:\+\+|\+|~)?" + re.escape(target) + r"(?:=\S*)?(?!\S)")
    found = word.search(command)
    old = found.group(0) if found else None
    new = None if key == "command-" else shlex.quote(raw)
    if found:
        data["command"] = command[: found.start()] + (new or "") + command[found.end() :]
    elif new is not None:
        data["command"] = f"{command.rstrip()} {new}"
    return SpecChange(label, old, new)


def clear_fixes(overrides: AttemptOverrides, changes: Sequence[SpecChange]) -> AttemptOverrides:
    """The rule fixes a person's changes supersede, dropped from what the next attempts carry: a rule's fix
    to a key wins until a person sets that key again, and then theirs does, until a rule fixes it again."""
    env = dict(overrides.env)
    sbatch = list(overrides.sbatch_args)
    exclude, mounts = overrides.exclude, overrides.mounts
    for c in changes:
        if c.key.startswith("env."):
            env.pop(c.key[4:], None)
        elif c.key == "slurm.exclude":
            exclude = ()
        elif c.key == "container.mounts":
            mounts = ()
        elif c.key in _SBATCH_OPTION:
            names = _SBATCH_OPTION[c.key]
            sbatch = [a for a in sbatch if a.split("=", 1)[0] not in names]
    return replace(overrides, env=env, sbatch_args=tuple(sbatch), exclude=exclude, mounts=mounts)


def change_log(events: Sequence[HistoryEntry], attempts: Sequence[AttemptRow]) -> list[dict[str, Any]]:
    """Every change to what a run's attempts ran with, oldest first: a person's `--set` (from the history)
    and each rule fix an attempt first carried (from its recorded overrides), with who made it."""
    out: list[dict[str, Any]] = [
        {
            "at": e.at,
            "attempt": None,
            "by": e.data.get("actor", "?"),
            "what": e.message.rsplit(" (set by ", 1)[0],
        }
        for e in events
        if e.kind == "spec-changed"
    ]
    before: set[str] = set()
    for a in attempts:
        o = AttemptOverrides.from_dict(a.overrides)
        fixes = {
            *(f"env {k}={v}" for k, v in o.env.items()),
            *o.sbatch_args,
            *(f"--exclude={n}" for n in o.exclude),
            *(f"mount {m}" for m in o.mounts),
        }
        new = sorted(fixes - before)
        if new:
            by = o.resumed_by or f"rule {o.reason.split(':', 1)[0] if o.reason else '?'}"
            out.append({"at": a.intent_at, "attempt": a.n, "by": by, "what": ", ".join(new)})
        before = fixes
    return sorted(out, key=lambda c: c["at"])


DRIVER_COMMAND_FILE = "driver_command.sh"  # where a launcher records the job's own command (main's ray.sub)


def recorded_command(text: str) -> list[str] | None:
    """The words of the command a launcher recorded (`driver_command.sh`: a shebang, maybe comments, then
    the command); None when the text is not one shell command line we can split."""
    body = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    try:
        words = shlex.split(body, comments=True)
    except ValueError:
        return None
    return words or None


def _overrides(words: Sequence[str]) -> dict[str, str]:
    return {k: w for w in words if "=" in w and (k := override_key(w)) is not None}


def command_differences(job_words: Sequence[str], spec: JobSpec) -> list[str]:
    """Where the spec's command differs from what an adopted job runs: each Hydra-style override with another
    value or only on one side, and the rest of the command line; the overrides shepherd adds itself to every
    attempt (the save deadline, the checkpoint dir) are not differences."""
    spec_words = shlex.split(spec.command) if isinstance(spec.command, str) else list(spec.command)
    own = {
        k
        for t in (spec.deadline_arg_template, *(spec.resume.checkpoint_dir_arg or ()))
        if t and (k := override_key(t)) is not None
    }
    ran, wants = _overrides(job_words), _overrides(spec_words)
    out = []
    for key in sorted((ran.keys() | wants.keys()) - own):
        if ran.get(key) != wants.get(key):
            job = f"`{ran[key]}`" if key in ran else "no " + key
            spec_has = f"`{wants[key]}`" if key in wants else "none"
            out.append(f"{key}: the job ran {job}, the spec says {spec_has}")
    rest_ran = [w for w in job_words if w not in ran.values()]
    rest_spec = [w for w in spec_words if w not in wants.values()]
    if rest_ran != rest_spec:
        out.append(f"command: the job ran `{shlex.join(rest_ran)}`, the spec says `{shlex.join(rest_spec)}`")
    return out
