"""`shepherd report [RUN ...] [--since DATE] [--json] [-o timeline.png]`: what every failure cost, per run and
summed over runs, read from the store; `-o` draws the run's timeline the way Slack gets it."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from supervisor.act.interval import cluster_exposure
from supervisor.act.interval import measure as measure_interval
from supervisor.cli.common import AddCommand, CliError, open_store, run_named, settings_of
from supervisor.decide.interval import Advice
from supervisor.domain.runs import RunRow
from supervisor.notify.timeline import render_timeline
from supervisor.report.interval import interval_json, interval_lines
from supervisor.report.read import run_report
from supervisor.report.text import reports_json, reports_text
from supervisor.store import Store


def register(add: AddCommand) -> None:
    p = add("report", cmd_report, "what each run's failures cost: GPU-hours by phase, goodput, a timeline")
    p.add_argument("runs", nargs="*", metavar="RUN", help="run ids or names (default: every run)")
    p.add_argument(
        "--since", help="only runs created since DATE (YYYY-MM-DD or YYYY-MM-DDTHH:MM, local time)"
    )
    p.add_argument("--json", action="store_true", help="the numbers as JSON (seconds, GPU-hours, failures)")
    p.add_argument("-o", "--output", help="draw the run's timeline picture to this PNG (one run)")


def parse_since(text: str) -> float:
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError as exc:
        raise CliError(f"--since {text!r} is not a date: use YYYY-MM-DD or YYYY-MM-DDTHH:MM") from exc
    return when.timestamp()


def interval_advice(store: Store, runs: Sequence[RunRow], now: float) -> dict[str, Advice]:
    """Each run's Young/Daly interval beside its own (runs with a checkpoint dir); all runs' failure rate is
    read once, for the runs with too few failures of their own."""
    if not any(r.spec.checkpoint is not None for r in runs):
        return {}
    cluster = cluster_exposure(store, now)
    out = {}
    for r in runs:
        advice = measure_interval(store, r, now, cluster=cluster)
        if advice is not None:
            out[r.id] = advice
    return out


def cmd_report(args: argparse.Namespace) -> int:
    since = parse_since(args.since) if args.since else None
    store = open_store(settings_of(args))
    runs = [run_named(store, ref) for ref in args.runs] if args.runs else store.list_runs()
    if since is not None:
        runs = [r for r in runs if r.created_at >= since]
    if args.output and len(runs) != 1:
        raise CliError(f"-o draws one run's timeline: name one run ({len(runs)} selected)")
    if not runs:
        print("no runs" + (f" since {args.since}" if args.since else ""), file=sys.stderr)
        return 0
    now = time.time()
    reports = [run_report(store, r, now) for r in runs]
    intervals = interval_advice(store, runs, now)
    if args.output:
        png = render_timeline(reports[0], Path(args.output))
        print(f"timeline: {png}", file=sys.stderr if args.json else sys.stdout)
    if args.json:
        print(
            json.dumps(reports_json(reports, {k: interval_json(a) for k, a in intervals.items()}), indent=2)
        )
    else:
        tuned = {r.id for r in runs if r.spec.checkpoint is not None and r.spec.checkpoint.tune_interval}
        lines = {k: interval_lines(a, tune=k in tuned) for k, a in intervals.items()}
        print(reports_text(reports, lines), end="")
    return 0
