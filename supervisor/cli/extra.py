"""Subcommands that live beside their modules: rules, plot, watch, service."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

AddFn = Callable[[str, Callable[[argparse.Namespace], int], str], argparse.ArgumentParser]


def register(sub: Any, add: AddFn) -> None:
    rules = add("rules", _rules_help, "check rules files, or replay a log through them")
    rsub = rules.add_subparsers(dest="rules_command", required=True)
    chk = rsub.add_parser("check", help="validate rules files (default: the shipped rules)")
    chk.add_argument("files", nargs="*")
    chk.set_defaults(func=cmd_rules_check)
    tst = rsub.add_parser("test", help="replay a log file through the rules and print what would fire")
    tst.add_argument("--log", required=True)
    tst.add_argument("--rules", nargs="*", default=None)
    tst.add_argument("--json", action="store_true")
    tst.set_defaults(func=cmd_rules_test)

    plot = add("plot", cmd_plot, "draw a run's reward and validation curves to a PNG")
    plot.add_argument("run")
    plot.add_argument("-o", "--output", required=True)

    watch = add("watch", cmd_watch, "a live view of active runs")
    watch.add_argument("run", nargs="?")
    watch.add_argument("--once", action="store_true", help="print one frame and exit")

    sil = add("silence", cmd_silence, "hold back a run's or a rule's alerts for a while (rules still act)")
    sil.add_argument("target", help="a run id or name, or rule:NAME")
    sil.add_argument("duration", help="e.g. 30m, 4h")

    svc = add("service", _rules_help, "install the systemd unit")
    ssub = svc.add_subparsers(dest="service_command", required=True)
    ins = ssub.add_parser("install", help="write the unit file and print the steps to enable it")
    ins.add_argument("--system", action="store_true", help="a system unit run as a service account")
    ins.add_argument("--user-name", default=None, help="the service account (system unit)")
    ins.add_argument("--env-file", default=None, help="file with secrets (mode 0600), e.g. SLACK tokens")
    ins.add_argument("--dest", default=None, help="write the unit here instead of the systemd folder")
    ins.set_defaults(func=cmd_service_install)


def _rules_help(args: argparse.Namespace) -> int:
    print("see --help", file=sys.stderr)
    return 2


def default_rules_files() -> list[Path]:
    from supervisor.rules.loader import default_rules_file

    return [default_rules_file()]


def cmd_rules_check(args: argparse.Namespace) -> int:
    from supervisor.rules.cli import rules_check

    files = [Path(f) for f in args.files] or default_rules_files()
    return rules_check(files, sys.stdout)


def cmd_rules_test(args: argparse.Namespace) -> int:
    from supervisor.rules.cli import rules_test

    rules = [Path(f) for f in args.rules] if args.rules else default_rules_files()
    return rules_test(Path(args.log), rules, args.json, sys.stdout)


def cmd_plot(args: argparse.Namespace) -> int:
    """The same Controller.plot that Slack's `/shepherd plot` uses, to a file instead of a thread."""
    import anyio

    from supervisor.act.control import Controller
    from supervisor.cli.main import _settings, _store
    from supervisor.ports import ControlError

    settings = _settings(args)
    store = _store(settings)
    try:
        _run, out = anyio.run(Controller(store, None).plot, args.run, Path(args.output), settings)
    except ControlError as exc:
        print(f"shepherd: {exc}", file=sys.stderr)
        return 1
    print(out)
    return 0


def cmd_watch(args: argparse.Namespace) -> int:
    from supervisor.cli.watch import watch

    return watch(args)


def cmd_service_install(args: argparse.Namespace) -> int:
    from supervisor.cli.main import _settings
    from supervisor.service.install import InstallError, install_unit

    settings = _settings(args)
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
        return 1
    print(text)
    return 0


def cmd_silence(args: argparse.Namespace) -> int:
    import os
    import time

    from supervisor.act.control import Controller
    from supervisor.cli.main import _settings, _store
    from supervisor.notify.silences import RULE_PREFIX, Silences
    from supervisor.ports import ControlError
    from supervisor.rules.model import parse_duration

    settings = _settings(args)
    store = _store(settings)
    try:
        seconds = parse_duration(args.duration)
        if not args.target.startswith(RULE_PREFIX):
            args.target = Controller(store, None).find(args.target).id
    except (ValueError, ControlError) as exc:
        print(f"shepherd: {exc}", file=sys.stderr)
        return 1
    until = Silences(store.db).add(args.target, seconds, f"cli:{os.environ.get('USER', os.getuid())}")
    print(f"silenced {args.target} until {time.strftime('%Y-%m-%d %H:%M', time.localtime(until))}")
    return 0
