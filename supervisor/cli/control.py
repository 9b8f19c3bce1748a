"""`shepherd cancel`, `hold`, `release`, `resume` and `silence`: a person steering runs, on the same
code path as Slack's commands."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from supervisor.act.adopt import adopt
from supervisor.act.checkpoints import resolve_checkpoint_for_run
from supervisor.act.control import Controller, find_run
from supervisor.cli.common import EXIT_ERROR, AddCommand, actor, open_store, report, settings_of, usage_error
from supervisor.domain.spec import check_spec_files, load_spec
from supervisor.domain.yamlpos import YamlDocumentError
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
    ad = add("adopt", cmd_adopt, "take over a running job submitted by hand (sbatch ray.sub) as a new run")
    ad.add_argument("job_id")
    ad.add_argument("--spec", required=True, help="the spec to judge it by and resume it with")
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


def cmd_adopt(args: argparse.Namespace) -> int:
    """Prints the new run's id; the daemon watches the job from its next poll."""
    settings = settings_of(args)
    path = Path(args.spec)
    try:
        spec = load_spec(path)
    except (YamlDocumentError, OSError) as exc:
        print(f"shepherd: invalid spec:\n{exc}", file=sys.stderr)
        return EXIT_ERROR
    problems = check_spec_files(spec)
    if problems:
        print("shepherd: invalid spec:\n" + "\n".join(f"{path}: {p}" for p in problems), file=sys.stderr)
        return EXIT_ERROR
    store = open_store(settings)
    slurm = SlurmClient(timeout_s=settings.slurm.command_timeout_s, bin_dir=settings.slurm.bin_dir)

    async def take_over() -> str:
        run = await adopt(store, slurm, settings, args.job_id, spec, path)
        return run.id

    return report(take_over)
