"""`shepherd cancel`, `hold`, `release`, `resume` and `silence`: a person steering runs, on the same
code path as Slack's commands."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Awaitable, Callable

from supervisor.act.checkpoints import resolve_checkpoint_for_run
from supervisor.act.control import Controller, find_run
from supervisor.cli.common import EXIT_ERROR, AddCommand, actor, open_store, report, settings_of, usage_error
from supervisor.notify.silences import RULE_PREFIX, Silences
from supervisor.ports import ControlError
from supervisor.rules.model import parse_duration
from supervisor.settings import Settings
from supervisor.slurm.client import SlurmClient
from supervisor.store import Store


def register(add: AddCommand) -> None:
    for name, fn, h in (
        ("cancel", cmd_cancel, "cancel a run"),
        ("hold", cmd_hold, "hold a run's pending job"),
        ("release", cmd_release, "release a held run"),
    ):
        add(name, fn, h).add_argument("run")
    r = add("resume", cmd_resume, "resubmit a run from a checkpoint")
    r.add_argument("run")
    r.add_argument("checkpoint", nargs="?", default="latest", help="latest | best | step_N")
    sil = add("silence", cmd_silence, "hold back a run's or a rule's alerts for a while (rules still act)")
    sil.add_argument("target", help="a run id or name, or rule:NAME")
    sil.add_argument("duration", help="e.g. 30m, 4h")


def _controller(settings: Settings, store: Store) -> Controller:
    slurm = SlurmClient(timeout_s=settings.slurm.command_timeout_s, bin_dir=settings.slurm.bin_dir)
    return Controller(store, slurm, resolve_checkpoint=resolve_checkpoint_for_run)


def _act(args: argparse.Namespace, verb: Callable[[Controller], Awaitable[str]]) -> int:
    settings = settings_of(args)
    ctl = _controller(settings, open_store(settings))
    return report(lambda: verb(ctl))


def cmd_cancel(args: argparse.Namespace) -> int:
    return _act(args, lambda c: c.cancel(args.run, actor()))


def cmd_hold(args: argparse.Namespace) -> int:
    return _act(args, lambda c: c.hold(args.run, actor()))


def cmd_release(args: argparse.Namespace) -> int:
    return _act(args, lambda c: c.release(args.run, actor()))


def cmd_resume(args: argparse.Namespace) -> int:
    which = args.checkpoint
    if which not in ("latest", "best") and not (which.startswith("step_") and which[5:].isdigit()):
        return usage_error("checkpoint must be latest, best or step_N")
    return _act(args, lambda c: c.resume(args.run, which, actor()))


def cmd_silence(args: argparse.Namespace) -> int:
    settings = settings_of(args)
    store = open_store(settings)
    try:
        seconds = parse_duration(args.duration)
        if not args.target.startswith(RULE_PREFIX):
            args.target = find_run(store, args.target).id
    except (ValueError, ControlError) as exc:
        print(f"shepherd: {exc}", file=sys.stderr)
        return EXIT_ERROR
    until = Silences(store.db).add(args.target, seconds, actor())
    print(f"silenced {args.target} until {time.strftime('%Y-%m-%d %H:%M', time.localtime(until))}")
    return 0
