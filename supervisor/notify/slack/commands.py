"""Slash commands and button presses -> typed commands, and who may run them. Pure.

The result of parsing is always one of the frozen dataclasses below (or a
`ParseError`); run names and checkpoints are checked against strict patterns,
so nothing a user types can reach Slurm's argument list as a string of its own.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Literal

from supervisor.notify.slack import blocks

RUN_REF_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,79}")
RULE_REF_RE = re.compile(r"rule:[A-Za-z0-9][A-Za-z0-9._-]{0,79}")
CHECKPOINT_RE = re.compile(r"latest|best|step_[0-9]{1,12}")
SLACK_ID_RE = re.compile(r"[A-Z0-9][A-Z0-9_]{1,30}")
_DURATION_RE = re.compile(r"([0-9]{1,6})([smhd])")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}
MAX_SILENCE_S = 30 * 86400
MAX_TEXT = 500
SET_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.]{0,100}[+-]?=\S{0,200}")


@dataclass(frozen=True, slots=True)
class Resume:
    run: str
    checkpoint: str = "latest"
    sets: tuple[str, ...] = ()  # KEY=VALUE changes to the run's spec (domain/changes.py), checked there


@dataclass(frozen=True, slots=True)
class Status:
    run: str | None = None


@dataclass(frozen=True, slots=True)
class Cancel:
    run: str


@dataclass(frozen=True, slots=True)
class Hold:
    run: str


@dataclass(frozen=True, slots=True)
class Release:
    run: str


@dataclass(frozen=True, slots=True)
class GiveUp:
    run: str


@dataclass(frozen=True, slots=True)
class Plot:
    run: str


@dataclass(frozen=True, slots=True)
class Report:
    run: str


@dataclass(frozen=True, slots=True)
class Silence:
    target: str  # a run ref, or "rule:<name>"
    seconds: float


@dataclass(frozen=True, slots=True)
class Help:
    pass


@dataclass(frozen=True, slots=True)
class ParseError:
    message: str


Command = Resume | Status | Cancel | Hold | Release | GiveUp | Silence | Plot | Report | Help
Parsed = Command | ParseError

HELP_TEXT = (
    "*Shepherd commands*\n"
    "`/resume <run> [latest|best|step_N]` — resubmit a stopped run from a checkpoint\n"
    "`/resume <run> [checkpoint] set KEY=VALUE ...` — and change it from that attempt on "
    "(`slurm.time=02:00:00`, `command+=policy.train_micro_batch_size=1`)\n"
    "`/status [run]` — one run, or all active runs\n"
    "`/cancel <run>` · `/hold <run>` · `/release <run>`\n"
    "`/shepherd silence <run|rule:NAME> <duration>` — e.g. `4h`, `30m`\n"
    "`/shepherd plot <run>` — reward and validation curves, posted into the run's thread\n"
    "`/shepherd report <run>` — goodput and what each failure cost; the timeline into the run's thread\n"
    "`/shepherd <command> ...` works for all of the above. `/help` shows this."
)


def action_name(cmd: Command) -> str:
    return {
        Resume: "resume",
        Status: "status",
        Cancel: "cancel",
        Hold: "hold",
        Release: "release",
        GiveUp: "give_up",
        Silence: "silence",
        Plot: "plot",
        Report: "report",
        Help: "help",
    }[type(cmd)]


def command_run(cmd: Command) -> str | None:
    if isinstance(cmd, Silence):
        return cmd.target
    return getattr(cmd, "run", None)


def parse_duration(text: str) -> float | None:
    """`4h`, `30m`, `1d`, `90s`, or `1h30m`; None if malformed or over 30 days."""
    if not text or len(text) > 24:
        return None
    total = 0
    pos = 0
    for m in _DURATION_RE.finditer(text):
        if m.start() != pos:
            return None
        total += int(m.group(1)) * _UNIT_S[m.group(2)]
        pos = m.end()
    if pos != len(text) or total <= 0 or total > MAX_SILENCE_S:
        return None
    return float(total)


def _run(arg: str) -> str | ParseError:
    if RUN_REF_RE.fullmatch(arg):
        return arg
    return ParseError(f"`{blocks.escape(blocks.clip(arg, 60))}` is not a run name or id")


def _one_run(
    verb: str, args: list[str], ctor: type[Cancel | Hold | Release | GiveUp | Plot | Report]
) -> Parsed:
    if len(args) != 1:
        return ParseError(f"usage: `/{verb} <run>`")
    run = _run(args[0])
    return run if isinstance(run, ParseError) else ctor(run)


def parse_words(verb: str, args: list[str]) -> Parsed:
    """The grammar shared by `/resume ...` and `/shepherd resume ...`."""
    verb = verb.lower()
    if verb in ("help", ""):
        return Help()
    if verb == "resume":
        head, sets = _split_sets(args)
        if not 1 <= len(head) <= 2 or (sets is not None and not sets):
            return ParseError("usage: `/resume <run> [latest|best|step_N] [set KEY=VALUE ...]`")
        run = _run(head[0])
        if isinstance(run, ParseError):
            return run
        checkpoint = head[1].lower() if len(head) == 2 else "latest"
        if not CHECKPOINT_RE.fullmatch(checkpoint):
            return ParseError("checkpoint must be `latest`, `best` or `step_N` (e.g. `step_1200`)")
        bad = [s for s in sets or () if not SET_RE.fullmatch(s)]
        if bad:
            return ParseError(f"`{blocks.escape(blocks.clip(bad[0], 60))}`: each change is one KEY=VALUE")
        return Resume(run, checkpoint, tuple(sets or ()))
    if verb == "status":
        if len(args) > 1:
            return ParseError("usage: `/status [run]`")
        if not args:
            return Status(None)
        run = _run(args[0])
        return run if isinstance(run, ParseError) else Status(run)
    if verb == "cancel":
        return _one_run(verb, args, Cancel)
    if verb == "hold":
        return _one_run(verb, args, Hold)
    if verb == "release":
        return _one_run(verb, args, Release)
    if verb in ("give_up", "giveup", "give-up"):
        return _one_run("give_up", args, GiveUp)
    if verb == "plot":
        return _one_run("shepherd plot", args, Plot)
    if verb == "report":
        return _one_run("shepherd report", args, Report)
    if verb == "silence":
        if len(args) != 2:
            return ParseError("usage: `/shepherd silence <run|rule:NAME> <duration>` (e.g. `4h`)")
        target = args[0]
        if not (RUN_REF_RE.fullmatch(target) or RULE_REF_RE.fullmatch(target)):
            return ParseError(f"`{blocks.escape(blocks.clip(target, 60))}` is not a run or `rule:NAME`")
        seconds = parse_duration(args[1].lower())
        if seconds is None:
            return ParseError("duration like `30m`, `4h` or `1d` (at most 30 days)")
        return Silence(target, seconds)
    return ParseError(f"unknown command `{blocks.escape(blocks.clip(verb, 40))}` — try `/help`")


def _split_sets(args: list[str]) -> tuple[list[str], list[str] | None]:
    """`run [checkpoint] set K=V ...` -> the words before `set`, and those after it (None: no `set`)."""
    lowered = [a.lower() for a in args]
    if "set" not in lowered:
        return args, None
    at = lowered.index("set")
    return args[:at], args[at + 1 :]


def parse_slash(command: str, text: str) -> Parsed:
    """`command` is Slack's ``/resume``; `text` is what the user typed after it."""
    if len(text) > MAX_TEXT:
        return ParseError("that command is too long")
    words = text.split()
    name = command.strip().lstrip("/").lower()
    if name == "shepherd":
        if not words:
            return Help()
        return parse_words(words[0], words[1:])
    if name in ("resume", "status", "cancel", "hold", "release", "help", "silence", "plot", "report"):
        return parse_words(name, words)
    return ParseError(f"unknown command `/{blocks.escape(blocks.clip(name, 40))}`")


def parse_action(action_id: str, value: str) -> Parsed:
    """A button press: the same typed command the slash command would give."""
    run = _run(value)
    if isinstance(run, ParseError):
        return run
    if action_id == blocks.ACTION_RESUME_LATEST:
        return Resume(run, "latest")
    if action_id == blocks.ACTION_GIVE_UP:
        return GiveUp(run)
    if action_id == blocks.ACTION_SILENCE_4H:
        return Silence(run, 4 * 3600.0)
    return ParseError("unknown button")


@dataclass(frozen=True, slots=True)
class AuthPolicy:
    """Who may do what: actors act; status readers (or everyone, '*') may only look."""

    actors: frozenset[str]
    channels: frozenset[str] = frozenset()
    status_readers: frozenset[str] = frozenset()

    @classmethod
    def of(
        cls, actors: Collection[str], channels: Collection[str] = (), status_readers: Collection[str] = ()
    ) -> AuthPolicy:
        return cls(frozenset(actors), frozenset(channels), frozenset(status_readers))


@dataclass(frozen=True, slots=True)
class Verdict:
    allowed: bool
    reason: Literal["ok", "not_authorised", "wrong_channel"]
    message: str = ""


def authorise(cmd: Command, user_id: str, channel_id: str | None, policy: AuthPolicy) -> Verdict:
    """Deny by default; /help is harmless and always allowed; /status, plot and report only read."""
    if isinstance(cmd, Help):
        return Verdict(True, "ok")
    valid_user = bool(SLACK_ID_RE.fullmatch(user_id))
    is_actor = valid_user and user_id in policy.actors
    if isinstance(cmd, Status | Plot | Report):  # looking, not acting: the wider read list
        if is_actor or "*" in policy.status_readers or (valid_user and user_id in policy.status_readers):
            return Verdict(True, "ok")
        return Verdict(False, "not_authorised", _REFUSAL)
    if not is_actor:
        return Verdict(False, "not_authorised", _REFUSAL)
    if policy.channels and (channel_id is None or channel_id not in policy.channels):
        return Verdict(
            False, "wrong_channel", "Sorry, Shepherd only takes that command in its ops channel(s)."
        )
    return Verdict(True, "ok")


_REFUSAL = (
    "Sorry, you're not on the list of people who can do that with Shepherd. "
    "Ask the run's owner or an admin to add your Slack user id to `slack.authorised_users`. "
    "(This attempt was logged.)"
)
