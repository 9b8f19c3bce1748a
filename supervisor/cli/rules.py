"""`shepherd rules check` and `shepherd rules test`: how users write and debug rules files."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from supervisor.cli.common import AddCommand, needs_subcommand
from supervisor.rules.engine import load_ruleset
from supervisor.rules.loader import DEFAULT_RULES_PATH, RulesError, check_files
from supervisor.rules.replay import replay


def register(add: AddCommand) -> None:
    rules = add("rules", needs_subcommand, "check rules files, or replay a log through them")
    rsub = rules.add_subparsers(dest="rules_command", required=True)
    chk = rsub.add_parser("check", help="validate rules files (default: the shipped rules)")
    chk.add_argument("files", nargs="*")
    chk.set_defaults(func=cmd_rules_check)
    tst = rsub.add_parser("test", help="replay a log file through the rules and print what would fire")
    tst.add_argument("--log", required=True)
    tst.add_argument("--rules", nargs="*", default=None)
    tst.add_argument("--json", action="store_true")
    tst.set_defaults(func=cmd_rules_test)


def cmd_rules_check(args: argparse.Namespace) -> int:
    return rules_check([Path(f) for f in args.files], sys.stdout)


def cmd_rules_test(args: argparse.Namespace) -> int:
    rules = [Path(f) for f in args.rules] if args.rules else []
    return rules_test(Path(args.log), rules, args.json, sys.stdout)


def rules_check(paths: Sequence[Path], out: TextIO) -> int:
    """Print `file:line: field: reason` for every problem; 0 when all files are fine."""
    files = list(paths) or [DEFAULT_RULES_PATH]
    errors = check_files(files)
    for err in errors:
        print(str(err), file=out)
    if not errors:
        print(f"ok: {', '.join(str(p) for p in files)}", file=out)
    return 1 if errors else 0


def rules_test(log_path: Path, rule_paths: Sequence[Path], as_json: bool, out: TextIO) -> int:
    """Replay a log file through the rules; print what would fire. Exit 2: bad rules or no log."""
    try:
        rs = load_ruleset(rule_paths, use_default=not rule_paths)
    except RulesError as exc:
        for err in exc.errors:
            print(str(err), file=out)
        return 2
    if not log_path.is_file():
        print(f"{log_path}: no such file", file=out)
        return 2
    matches = replay(rs, log_path)
    if as_json:
        rows = [
            {
                "rule": m.rule,
                "action": ",".join(m.action_names),
                "line": m.line,
                "supersedes": list(m.supersedes),
                "signature": m.signature,
            }
            for m in matches
            if not m.followup
        ]
        print(json.dumps(rows), file=out)
        return 0
    if not matches:
        print(f"{log_path}: no rule fires", file=out)
    for m in matches:
        ev = m.evidence
        lines = f"{ev.first_line}-{ev.first_line + len(ev.lines) - 1}" if len(ev.lines) > 1 else f"{m.line}"
        if m.followup:
            print(f"  ~ {m.rule}  line {lines}  (part of the {m.followup_of} incident, no action)", file=out)
            continue
        extra = f"  supersedes {', '.join(m.supersedes)}" if m.supersedes else ""
        node = f"  node {m.node}" if m.node else ""
        print(f"{m.rule}  line {lines}  -> {', '.join(m.action_names)}{node}{extra}", file=out)
        print(f"    {m.reason[:200]}", file=out)
    return 0
