"""`shepherd rules check|test|list|suggest`: how users write, debug and start rules files."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Literal, TextIO

from supervisor.act.decisive import decisive_lines
from supervisor.cli.common import EXIT_ERROR, AddCommand, CliError, needs_subcommand, open_store, run_named
from supervisor.cli.common import settings_of as _settings_of
from supervisor.domain.runs import UNRECOGNISED
from supervisor.domain.spec import JobSpec, load_spec
from supervisor.domain.yamlpos import YamlDocumentError
from supervisor.rules.decisive import DecisiveLine, suggest_rule
from supervisor.rules.engine import RuleSet, load_ruleset, spec_ruleset
from supervisor.rules.loader import DEFAULT_RULES_PATH, RulesError, check_files
from supervisor.rules.model import (
    LogTrigger,
    MetricTrigger,
    MissingTrigger,
    PendingTrigger,
    Rule,
    StalledTrigger,
    StateTrigger,
)
from supervisor.rules.replay import replay
from supervisor.store import Store


def register(add: AddCommand) -> None:
    rules = add("rules", needs_subcommand, "check, list and test rules files; suggest one for a failure")
    rsub = rules.add_subparsers(dest="rules_command", required=True)
    chk = rsub.add_parser("check", help="validate rules files (default: the shipped rules)")
    chk.add_argument("files", nargs="*")
    chk.set_defaults(func=cmd_rules_check)
    tst = rsub.add_parser("test", help="replay a log file through the rules and print what would fire")
    tst.add_argument("log", nargs="?", help="the log file to replay")
    tst.add_argument("--log", dest="log_option", default=None, help=argparse.SUPPRESS)  # the old spelling
    _ruleset_arguments(tst)
    tst.add_argument(
        "--as",
        dest="source",
        default=None,
        metavar="NAME",
        help="the log's name as the daemon would see it (ray-driver.log, slurm-123.out): rules' `sources`",
    )
    tst.add_argument("--json", action="store_true")
    tst.set_defaults(func=cmd_rules_test)
    lst = rsub.add_parser("list", help="the rules in force: name, triggers, actions")
    _ruleset_arguments(lst)
    lst.set_defaults(func=cmd_rules_list)
    sug = rsub.add_parser("suggest", help="a starting rule for a run's failure no rule recognised")
    sug.add_argument("run", help="run id, name or id prefix")
    sug.add_argument("--root", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    sug.set_defaults(func=cmd_rules_suggest)


def _ruleset_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--spec", default=None, help="a run's spec: its rules (defaults, rules.files, rules.disable)"
    )
    p.add_argument(
        "--rules", nargs="*", default=None, metavar="FILE", help="rules files added (as a spec's rules.files)"
    )
    p.add_argument("--no-default", action="store_true", help="leave the shipped default rules out")


def cmd_rules_check(args: argparse.Namespace) -> int:
    return rules_check([Path(f) for f in args.files], sys.stdout)


def _spec_of(path: str | None) -> JobSpec | None:
    if path is None:
        return None
    try:
        return load_spec(Path(path), base=Path(path).resolve().parent, cwd=Path.cwd())
    except (YamlDocumentError, OSError) as exc:
        raise CliError(f"invalid spec:\n{exc}") from exc


def cmd_rules_test(args: argparse.Namespace) -> int:
    log = args.log or args.log_option
    if log is None:
        raise CliError("rules test: which log? (`shepherd rules test LOG`)")
    return rules_test(
        Path(log),
        [Path(f) for f in args.rules or ()],
        args.json,
        sys.stdout,
        spec=_spec_of(args.spec),
        use_default=not args.no_default,
        source=args.source,
    )


def cmd_rules_list(args: argparse.Namespace) -> int:
    return rules_list(
        [Path(f) for f in args.rules or ()],
        sys.stdout,
        spec=_spec_of(args.spec),
        use_default=not args.no_default,
    )


def cmd_rules_suggest(args: argparse.Namespace) -> int:
    settings = _settings_of(args)
    store = open_store(settings)
    try:
        return rules_suggest(store, settings.runs_dir, args.run, sys.stdout)
    finally:
        store.close()


def rules_check(paths: Sequence[Path], out: TextIO) -> int:
    """Print `file:line: field: reason` for every problem; 0 when all files are fine."""
    files = list(paths) or [DEFAULT_RULES_PATH]
    errors = check_files(files)
    for err in errors:
        print(str(err), file=out)
    if not errors:
        print(f"ok: {', '.join(str(p) for p in files)}", file=out)
    return 1 if errors else 0


def ruleset_of(rule_paths: Sequence[Path], spec: JobSpec | None = None, use_default: bool = True) -> RuleSet:
    """The rules a command works with: a spec's (as the daemon builds them for its runs) plus `rule_paths`,
    or the defaults plus `rule_paths`; `use_default=False` leaves the defaults out (raises `RulesError`)."""
    if spec is not None:
        if not use_default:
            spec = spec.model_copy(update={"rules": spec.rules.model_copy(update={"use_default": False})})
        return spec_ruleset(spec, rule_paths)
    return load_ruleset(rule_paths, use_default=use_default)


def _loaded(
    rule_paths: Sequence[Path], out: TextIO, spec: JobSpec | None, use_default: bool
) -> RuleSet | None:
    try:
        return ruleset_of(rule_paths, spec, use_default)
    except RulesError as exc:
        for err in exc.errors:
            print(str(err), file=out)
        return None


def skipped_for(rs: RuleSet, source: str) -> list[str]:
    """The rules with log triggers whose `sources` globs all leave this log out (in priority order)."""
    reading = {r.name for r in rs.log_rules_for(source)}
    return [r.name for r in rs.rules if r.logs and r.name not in reading]


def rules_test(
    log_path: Path,
    rule_paths: Sequence[Path],
    as_json: bool,
    out: TextIO,
    *,
    spec: JobSpec | None = None,
    use_default: bool = True,
    source: str | None = None,
) -> int:
    """Replay a log file through the rules (the defaults plus `rule_paths`, or a spec's set plus them) as if
    the daemon read it under the name `source`; print what would fire and which rules its name kept out.
    Exit 2: bad rules or no log."""
    rs = _loaded(rule_paths, out, spec, use_default)
    if rs is None:
        return 2
    if not log_path.is_file():
        print(f"{log_path}: no such file", file=out)
        return 2
    name = source or log_path.name
    matches = replay(rs, log_path, name)
    skipped = skipped_for(rs, name)
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
    if skipped:
        print(f"skipped (their `sources` leave out {name}; --as NAME reads it as another file):", file=out)
        print(f"  {', '.join(skipped)}", file=out)
    return 0


def trigger_summary(rule: Rule) -> str:
    """`log [slurm-*.out], state NODE_FAIL|BOOT_FAIL`: a rule's triggers on one line."""
    parts = []
    for t in rule.all_triggers:
        if isinstance(t, LogTrigger):
            parts.append(f"log [{', '.join(t.sources)}]" if t.sources else "log")
        elif isinstance(t, StateTrigger):
            parts.append("state " + "|".join(s.value for s in t.states))
        elif isinstance(t, PendingTrigger):
            parts.append(f"pending {t.for_s:g}s")
        elif isinstance(t, StalledTrigger):
            parts.append(f"stalled {t.for_s:g}s" + (" (learnt)" if t.learn is not None else ""))
        elif isinstance(t, MissingTrigger):
            parts.append(f"missing {t.file}")
        elif isinstance(t, MetricTrigger):
            parts.append(f"metric {t.tag} {t.condition}")
    return ", ".join(parts)


def rules_list(
    rule_paths: Sequence[Path], out: TextIO, *, spec: JobSpec | None = None, use_default: bool = True
) -> int:
    """One row per rule in force (priority order): name, priority, triggers, actions. Exit 2: bad rules."""
    rs = _loaded(rule_paths, out, spec, use_default)
    if rs is None:
        return 2
    rows = [
        (r.name, str(r.priority), trigger_summary(r.rule), ", ".join(a.kind for a in r.rule.actions) or "-")
        for r in rs.rules
    ]
    head = ("RULE", "PRI", "TRIGGERS", "ACTIONS")
    width = [max(len(row[i]) for row in [head, *rows]) for i in range(3)]
    for row in [head, *rows]:
        print(
            f"{row[0]:<{width[0]}}  {row[1]:>{width[1]}}  {row[2]:<{width[2]}}  {row[3]}".rstrip(), file=out
        )
    return 0


def rules_suggest(store: Store, runs_dir: Path, ref: str, out: TextIO) -> int:
    """A starting rules file for the run's latest end no rule recognised, from its decisive line (kept with
    the decision; else read again from the attempt's logs). Exit 1: nothing to build a rule from."""
    run = run_named(store, ref)
    decided = [d for d in store.decisions(run.id) if d.rule == UNRECOGNISED]
    n = decided[-1].attempt if decided and decided[-1].attempt else None
    kept = [_decisive(x) for x in (decided[-1].evidence.get("decisive") or ())] if decided else []
    found = [d for d in kept if d is not None]
    attempt = store.get_attempt(run.id, n) if n is not None else store.latest_attempt(run.id)
    if not found and attempt is not None:
        found = decisive_lines(runs_dir, run, attempt)
    if not found:
        print(
            f"shepherd: {run.id}: no traceback or error line in its logs to build a rule from",
            file=sys.stderr,
        )
        return EXIT_ERROR
    print(suggest_rule(found[0], run=run.id, attempt=attempt.n if attempt else None), end="", file=out)
    return 0


def _decisive(d: object) -> DecisiveLine | None:
    """A decisive line as a decision keeps it (DecisiveLine.as_dict), or None if it is not one."""
    if not isinstance(d, dict):
        return None
    try:
        kind: Literal["exception", "error"] = "exception" if d.get("kind") == "exception" else "error"
        return DecisiveLine(str(d["source"]), int(d["line"]), str(d["text"]), kind, str(d["signature"]))
    except (KeyError, TypeError, ValueError):
        return None
