"""The `shepherd` command: the parser, and the dispatch of each verb to its module in this package."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from importlib import metadata

from supervisor.cli import (
    checkpoints,
    completion,
    control,
    doctor,
    history,
    logs,
    plot,
    report,
    rules,
    runs,
    service,
    watch,
)
from supervisor.cli.common import EXIT_ERROR, EXIT_USAGE, CliError, Handler
from supervisor.settings import SettingsError


def installed_version() -> str:
    """The version of the installed distribution (a wheel's, or the editable checkout's metadata)."""
    try:
        return metadata.version("shepherd")
    except metadata.PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="shepherd", description="Supervise GRPO runs on Slurm + Ray.")
    p.add_argument("--version", action="version", version=f"shepherd {installed_version()}")
    p.add_argument(
        "--root", default=None, help="state root (default: $SHEPHERD_ROOT or ~/.local/state/shepherd)"
    )
    sub = p.add_subparsers(dest="command", required=True)

    def add(name: str, handler: Handler, help_: str) -> argparse.ArgumentParser:
        sp = sub.add_parser(name, help=help_)
        sp.add_argument("--root", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
        sp.set_defaults(func=handler)
        return sp

    for group in (
        service,
        runs,
        checkpoints,
        logs,
        history,
        control,
        rules,
        plot,
        report,
        watch,
        doctor,
        completion,
    ):
        group.register(add)
    p.set_defaults(parser=p)  # the whole tree, for `completion` (which may not import this module: a cycle)
    return p


EXIT_BROKEN_PIPE = 141  # what a shell reports for a command ended by SIGPIPE (`yes | head`)


def _only_broken_pipes(exc: BaseException) -> bool:
    """A closed reader, possibly reported from inside a task group (an ExceptionGroup of them)."""
    if isinstance(exc, BaseExceptionGroup):
        return all(_only_broken_pipes(e) for e in exc.exceptions)
    return isinstance(exc, BrokenPipeError)


def _quiet_after_broken_pipe() -> int:
    """The reader of our stdout went away (`shepherd status | head`): stop without a traceback. Python's own
    exit would flush stdout again and print "Exception ignored ... BrokenPipeError": point the descriptor at
    /dev/null first (the recipe of Python's signal module docs)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return EXIT_BROKEN_PIPE


def _dispatch(argv: Sequence[str] | None) -> int:
    args = build_parser().parse_args(argv)
    if not hasattr(args, "root"):
        args.root = None
    try:
        code: int = args.func(args)
    except CliError as exc:
        print(f"shepherd: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except SettingsError as exc:  # shepherd.toml or a SHEPHERD_* variable: every problem, located
        print(f"shepherd: invalid settings, nothing done:\n{exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    return code


def main(argv: Sequence[str] | None = None) -> int:
    try:
        try:
            code = _dispatch(argv)
        finally:
            # Here (also after --help's SystemExit), where a closed pipe can still be told apart from a real
            # error, rather than in Python's own flush at exit.
            sys.stdout.flush()
    except BaseException as exc:
        if _only_broken_pipes(exc):
            return _quiet_after_broken_pipe()
        raise
    return code


if __name__ == "__main__":
    sys.exit(main())
