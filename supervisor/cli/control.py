"""`shepherd cancel`, `hold`, `release`, `resume`, `give-up`, `silence` and `adopt`: a person steering runs,
on the same code path as Slack's commands, carried out only by the process that holds the root's lease (a CLI
on another login node must never act beside the daemon, unfenced)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from supervisor.act.control import changed_spec
from supervisor.act.mailbox import ask
from supervisor.cli.common import (
    EXIT_ERROR,
    AddCommand,
    actor,
    open_store,
    report,
    run_named,
    settings_of,
    usage_error,
)
from supervisor.domain.spec import check_spec_files, load_spec
from supervisor.domain.yamlpos import YamlDocumentError
from supervisor.ports import ControlError
from supervisor.rules.model import parse_duration


def register(add: AddCommand) -> None:
    for name, fn, h in (
        ("cancel", cmd_cancel, "cancel a run"),
        ("hold", cmd_hold, "hold a run's pending job"),
        ("release", cmd_release, "release a held run"),
        ("give-up", cmd_give_up, "stop a run for good and close its incident (Slack's Give up button)"),
    ):
        add(name, fn, h).add_argument("run")
    r = add("resume", cmd_resume, "resubmit a run from a checkpoint")
    r.add_argument("run")
    r.add_argument("checkpoint", nargs="?", default="latest", help="latest | best | step_N")
    r.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="change the run's spec from this attempt on (repeatable): a field (slurm.time=02:00:00, "
        "env.NCCL_DEBUG=INFO) or a trainer override (command+=policy.train_micro_batch_size=1; "
        "command-=KEY drops one)",
    )
    ad = add("adopt", cmd_adopt, "take over a running job submitted by hand (sbatch ray.sub) as a new run")
    ad.add_argument("job_id")
    ad.add_argument("--spec", required=True, help="the spec to judge it by and resume it with")
    sil = add("silence", cmd_silence, "hold back a run's or a rule's alerts for a while (rules still act)")
    sil.add_argument("target", help="a run id or name, or rule:NAME")
    sil.add_argument("duration", help="e.g. 30m, 4h")


def _ask(args: argparse.Namespace, verb: str, **fields: str) -> int:
    """Hand `verb` to the process that may act (act/mailbox.py: the lease holder, or this one under it)."""
    settings = settings_of(args)
    return report(lambda: ask(settings, verb, fields, actor()))


def cmd_cancel(args: argparse.Namespace) -> int:
    return _ask(args, "cancel", run=args.run)


def cmd_hold(args: argparse.Namespace) -> int:
    return _ask(args, "hold", run=args.run)


def cmd_release(args: argparse.Namespace) -> int:
    return _ask(args, "release", run=args.run)


def cmd_give_up(args: argparse.Namespace) -> int:
    return _ask(args, "give-up", run=args.run)


def cmd_resume(args: argparse.Namespace) -> int:
    which = args.checkpoint
    if which not in ("latest", "best") and not (which.startswith("step_") and which[5:].isdigit()):
        return usage_error("checkpoint must be latest, best or step_N")
    if not args.sets:
        return _ask(args, "resume", run=args.run, checkpoint=which)
    # Checked here first (the store is readable from any login node): a refusal comes back at once, and a
    # secret refused never travels in a request file.
    settings = settings_of(args)
    try:
        changed_spec(run_named(open_store(settings), args.run), args.sets, "--set")
    except ControlError as exc:
        print(f"shepherd: {exc}", file=sys.stderr)
        return EXIT_ERROR
    return _ask(args, "resume", run=args.run, checkpoint=which, sets=json.dumps(args.sets))


def cmd_silence(args: argparse.Namespace) -> int:
    try:
        seconds = parse_duration(args.duration)
    except ValueError as exc:
        print(f"shepherd: {exc}", file=sys.stderr)
        return EXIT_ERROR
    return _ask(args, "silence", target=args.target, seconds=repr(seconds))


def cmd_adopt(args: argparse.Namespace) -> int:
    """Prints the new run's id; the daemon watches the job from its next poll. The spec is checked here first,
    so its errors come back at once and point at the file as the user named it."""
    path = Path(args.spec).resolve()
    try:
        spec = load_spec(path, base=path.parent, cwd=Path.cwd())
    except (YamlDocumentError, OSError) as exc:
        print(f"shepherd: invalid spec:\n{exc}", file=sys.stderr)
        return EXIT_ERROR
    problems = check_spec_files(spec)
    if problems:
        print("shepherd: invalid spec:\n" + "\n".join(f"{args.spec}: {p}" for p in problems), file=sys.stderr)
        return EXIT_ERROR
    settings = settings_of(args)

    async def adopt_and_warn() -> str:
        run_id, *notes = (
            await ask(settings, "adopt", {"job_id": args.job_id, "spec": str(path)}, actor())
        ).split("\n")
        for note in notes:  # stdout stays the run id alone, for scripts
            print(f"shepherd: warning: {note}", file=sys.stderr)
        return run_id

    return report(adopt_and_warn)
