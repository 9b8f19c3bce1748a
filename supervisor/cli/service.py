"""`shepherd daemon` and `shepherd service install`: running the supervisor, by hand or under systemd."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from supervisor.cli.common import EXIT_ERROR, AddCommand, needs_subcommand, settings_of
from supervisor.daemon.compose import run_daemon
from supervisor.service.install import InstallError, install_unit


def register(add: AddCommand) -> None:
    d = add("daemon", cmd_daemon, "run the supervisor daemon")
    d.add_argument("--log-format", choices=["auto", "json", "pretty"], default="auto")
    svc = add("service", needs_subcommand, "install the systemd unit")
    ssub = svc.add_subparsers(dest="service_command", required=True)
    ins = ssub.add_parser("install", help="write the unit file and print the steps to enable it")
    ins.add_argument("--system", action="store_true", help="a system unit run as a service account")
    ins.add_argument("--user-name", default=None, help="the service account (system unit)")
    ins.add_argument("--env-file", default=None, help="file with secrets (mode 0600), e.g. SLACK tokens")
    ins.add_argument("--dest", default=None, help="write the unit here instead of the systemd folder")
    ins.set_defaults(func=cmd_service_install)


def cmd_daemon(args: argparse.Namespace) -> int:
    return run_daemon(settings_of(args), log_format=args.log_format)


def cmd_service_install(args: argparse.Namespace) -> int:
    settings = settings_of(args)
    try:
        text = install_unit(
            "system" if args.system else "user",
            settings.root.resolve(),
            env_file=Path(args.env_file).resolve() if args.env_file else None,
            user=args.user_name,
            dest=Path(args.dest) if args.dest else None,
        )
    except InstallError as exc:
        print(f"shepherd: {exc}", file=sys.stderr)
        return EXIT_ERROR
    print(text)
    return 0
