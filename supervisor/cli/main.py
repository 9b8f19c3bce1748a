"""The `shepherd` command: the parser, and the dispatch of each verb to its module in this package."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from supervisor.cli import control, doctor, plot, report, rules, runs, service, watch
from supervisor.cli.common import EXIT_ERROR, CliError, Handler


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="shepherd", description="Supervise GRPO runs on Slurm + Ray.")
    p.add_argument(
        "--root", default=None, help="state root (default: $SHEPHERD_ROOT or ~/.local/state/shepherd)"
    )
    sub = p.add_subparsers(dest="command", required=True)

    def add(name: str, handler: Handler, help_: str) -> argparse.ArgumentParser:
        sp = sub.add_parser(name, help=help_)
        sp.add_argument("--root", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
        sp.set_defaults(func=handler)
        return sp

    for group in (service, runs, control, rules, plot, report, watch, doctor):
        group.register(add)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "root"):
        args.root = None
    try:
        code: int = args.func(args)
    except CliError as exc:
        print(f"shepherd: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())
