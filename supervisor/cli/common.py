"""What every `shepherd` verb shares: exit codes, the root's settings and store, the run a reference names,
and how a verb that acts reports its outcome."""

from __future__ import annotations

import argparse
import os
import pwd
import re
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Protocol

import anyio

from supervisor.act.control import find_run
from supervisor.domain.runs import RunRow
from supervisor.ports import ControlError
from supervisor.settings import Settings, load_settings
from supervisor.slurm.client import SlurmError, SlurmUnavailable
from supervisor.store import Store

EXIT_USAGE = 2
EXIT_ERROR = 1

Handler = Callable[[argparse.Namespace], int]


class AddCommand(Protocol):
    """Adds one verb (with the hidden per-verb `--root`) and returns its parser."""

    def __call__(self, name: str, handler: Handler, help_: str) -> argparse.ArgumentParser: ...


class CliError(Exception):
    """Said to the user as `shepherd: <message>` with exit code 1."""


def settings_of(args: argparse.Namespace) -> Settings:
    return load_settings(Path(args.root).resolve() if args.root else None)


def open_store(settings: Settings) -> Store:
    """The store for reading (status, logs, report, plot): every write transaction is refused, since only the
    lease holder writes (the commands that change runs go through it: act/mailbox.py)."""
    if not settings.db_path.exists():
        settings.ensure_dirs()
    return Store(settings.db_path, write_guard=_read_only)


def _read_only() -> None:
    raise CliError("this command only reads the store; changes go through the daemon that holds the lease")


def run_named(store: Store, ref: str) -> RunRow:
    """The run `ref` names (id, name or id prefix), or a CliError saying why not."""
    try:
        return find_run(store, ref)
    except ControlError as exc:
        raise CliError(str(exc)) from exc


def user_name(uid: int) -> str:
    """The account's name for `uid` (the password database's), or the uid itself where it has none."""
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def actor() -> str:
    """Who a CLI action is recorded as (in the run's history and Slack thread): the account's name, not $USER
    (unset under sudo -i, cron and containers, where `cli:0` said nothing)."""
    return f"cli:{user_name(os.getuid())}"


_UID_ACTOR = re.compile(r"\bcli:(\d+)\b")


def readable_actors(text: str) -> str:
    """Texts recorded before actors were names (`requested by cli:0`) name the account instead."""
    return _UID_ACTOR.sub(lambda m: f"cli:{user_name(int(m.group(1)))}", text)


def report(action: Callable[[], Awaitable[str]]) -> int:
    """Run an async action; print its message, or `shepherd: <why>` for a refusal or a Slurm error."""
    try:
        message = anyio.run(action)
    except ControlError as exc:
        print(f"shepherd: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except SlurmUnavailable as exc:
        print(f"shepherd: Slurm unreachable, try again when it answers: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except SlurmError as exc:
        print(f"shepherd: slurm: {exc}", file=sys.stderr)
        return EXIT_ERROR
    print(message)
    return 0


def usage_error(message: str) -> int:
    print(f"shepherd: {message}", file=sys.stderr)
    return EXIT_USAGE


def needs_subcommand(args: argparse.Namespace) -> int:
    """A group verb (`rules`, `service`) called without its subcommand."""
    print("see --help", file=sys.stderr)
    return EXIT_USAGE
