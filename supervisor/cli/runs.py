"""`shepherd submit`, `status` and `logs`: putting a run in the queue and looking at runs."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

import anyio

from supervisor.act.forensics import SUMMARY_JSON, latest_forensics
from supervisor.act.interval import measure as measure_interval
from supervisor.cli.attention import Selection, Waiting, parse_since, select, waiting_in
from supervisor.cli.common import (
    EXIT_ERROR,
    AddCommand,
    CliError,
    open_store,
    readable_actors,
    run_named,
    settings_of,
    usage_error,
)
from supervisor.cli.dryrun import print_dry_run
from supervisor.cli.unclaimed import (
    lease_text,
    print_unclaimed,
    print_waiting_and_rejected,
    unclaimed_detail,
    waiting_and_rejected,
)
from supervisor.cli.watch import progress_lines
from supervisor.domain.changes import change_log
from supervisor.domain.envfiles import EnvFileError
from supervisor.domain.jobstate import describe_exit
from supervisor.domain.runs import RunRow, shown_reason
from supervisor.domain.spec import JobSpec, check_spec_files, load_spec, spec_yaml
from supervisor.domain.yamlpos import YamlDocumentError
from supervisor.intake.queue import keep_pass_env, new_run_id
from supervisor.notify.silences import RULE_PREFIX, Silences
from supervisor.preflight.probe import run_preflight
from supervisor.report.interval import interval_json, interval_lines
from supervisor.rules.loader import spec_rules_problems
from supervisor.settings import Settings
from supervisor.slurm.client import SlurmClient
from supervisor.store import Store


def register(add: AddCommand) -> None:
    s = add(
        "submit", cmd_submit, "validate a spec, check it against the cluster, queue it; prints the run id"
    )
    s.add_argument("spec")
    s.add_argument(
        "--no-preflight",
        action="store_true",
        help="skip the checks of paths and of `sbatch --test-only` (here and at the daemon's intake)",
    )
    s.add_argument(
        "--dry-run",
        action="store_true",
        help="print the first attempt's sbatch line, its environment (secret values masked) and COMMAND; "
        "submit and queue nothing",
    )
    st = add("status", cmd_status, "show runs, or one run in detail")
    st.add_argument("run", nargs="?")
    st.add_argument("--json", action="store_true")
    st.add_argument(
        "--active", action="store_true", help="only runs not ended, and ended runs that wait for a person"
    )
    st.add_argument(
        "--needs-human",
        action="store_true",
        help="only runs that wait for a person (stopped, given up by a rule, held)",
    )
    st.add_argument(
        "--since", metavar="WHEN", help="only runs created or changed since: 2h, 1d, 09:00, a date"
    )
    st.add_argument("-n", type=int, metavar="N", dest="newest", help="only the newest N runs")


def cmd_submit(args: argparse.Namespace) -> int:
    settings = settings_of(args)
    path = Path(args.spec)
    try:
        spec = load_spec(path, base=path.resolve().parent, cwd=Path.cwd())
    except (YamlDocumentError, OSError) as exc:
        print(f"shepherd: invalid spec:\n{exc}", file=sys.stderr)
        return EXIT_ERROR
    problems = [f"{path}: {p}" for p in check_spec_files(spec)] or spec_rules_problems(spec)
    if problems:
        print("shepherd: invalid spec:\n" + "\n".join(problems), file=sys.stderr)
        return EXIT_ERROR
    if args.dry_run:
        return print_dry_run(settings, spec, path, os.environ)
    missing = [n for n in spec.pass_env if n not in os.environ]
    if missing:
        print(
            f"shepherd: {path}: pass_env: {', '.join(missing)} not set in this shell; export it and submit "
            "again (pass_env takes the values from the environment of `shepherd submit`)",
            file=sys.stderr,
        )
        return EXIT_ERROR
    data = spec_yaml(spec, path.resolve()).encode()  # relative paths made absolute: the queue has no folder
    if args.no_preflight:
        if "preflight" in spec.model_fields_set:
            print(
                f"shepherd: {path} has its own `preflight:` section; set `skip: [all]` there instead of "
                "--no-preflight",
                file=sys.stderr,
            )
            return EXIT_ERROR
        data = data.rstrip(b"\n") + b"\npreflight: {skip: [all]}\n"  # the daemon's intake skips it too
    elif _preflight_refuses(settings, spec, path):
        return EXIT_ERROR
    settings.queue_dir.mkdir(parents=True, exist_ok=True)
    run_id = new_run_id(spec.name, time.time())
    tmp = settings.queue_dir / f".{run_id}.yaml.tmp"
    if spec.workdir is None:
        # Like sbatch: a job runs where it was submitted from, unless the spec says otherwise.
        data = data.rstrip(b"\n") + b"\n" + f"workdir: {json.dumps(str(Path.cwd()))}\n".encode()
    tmp.write_bytes(data)
    if spec.pass_env:  # the values go beside the spec (0600), never into it; intake moves them to the run
        try:
            keep_pass_env(settings.queue_dir / f"{run_id}.yaml", {n: os.environ[n] for n in spec.pass_env})
        except EnvFileError as exc:
            tmp.unlink(missing_ok=True)
            print(f"shepherd: {path}: pass_env: {exc}", file=sys.stderr)
            return EXIT_ERROR
    os.replace(tmp, settings.queue_dir / f"{run_id}.yaml")  # atomic: the daemon never sees half a file
    print(run_id)
    return 0


def _preflight_refuses(settings: Settings, spec: JobSpec, path: Path) -> bool:
    """Run preflight (bounded by preflight.timeout_s); print warnings; True if a problem refuses the spec."""
    pf = settings.preflight
    slurm = SlurmClient(
        timeout_s=min(pf.timeout_s, settings.slurm.command_timeout_s), bin_dir=settings.slurm.bin_dir
    )
    problems = anyio.run(
        partial(
            run_preflight,
            spec,
            slurm=slurm if pf.test_only else None,
            nodes=slurm,
            timeout_s=pf.timeout_s,
            shared_paths=pf.shared_paths,
        )
    )
    for p in problems:
        if not p.blocking:
            print(f"shepherd: warning: {path}: {p}", file=sys.stderr)
    blocking = [p for p in problems if p.blocking]
    if blocking:
        print(
            "shepherd: preflight: the job would fail:\n"
            + "\n".join(f"{path}: {p}" for p in blocking)
            + "\n(--no-preflight queues it anyway)",
            file=sys.stderr,
        )
    return bool(blocking)


# ---- status ------------------------------------------------------------------------------------------------
def _run_summary(store: Store, run: RunRow, wait: Waiting | None = None) -> dict[str, Any]:
    attempts = store.attempts(run.id)
    latest = attempts[-1] if attempts else None
    return {
        "needs_human": wait.text() if wait else None,
        "id": run.id,
        "name": run.name,
        "state": run.state.value,
        "held": run.held,
        "slurm_job_id": latest.job_id if latest else None,
        "slurm_state": latest.slurm_state if latest else None,
        "pending_reason": latest.reason if latest and latest.slurm_state == "PENDING" else None,
        "exit_code": latest.exit_code if latest else None,
        "exit_signal": latest.exit_signal if latest else None,
        "attempts": len(attempts),
        "reason": shown_reason(run),
        "next_action_at": run.next_action_at,
        "created_at": run.created_at,
    }


def _forensics(folder: Path | None) -> dict[str, Any] | None:
    """The newest hang's forensics summary (act/forensics.py wrote it), with where the rest of it is."""
    if folder is None:
        return None
    try:
        data = json.loads((folder / SUMMARY_JSON).read_text())
    except (OSError, ValueError) as exc:
        return {"path": str(folder), "headline": f"unreadable summary: {exc}"}
    return {**data, "path": str(folder)} if isinstance(data, dict) else None


def _run_detail(store: Store, run: RunRow, settings: Settings | None = None) -> dict[str, Any]:
    out = _run_summary(store, run, waiting_in(store, run, time.time()))
    out["attempt_list"] = [
        {
            "n": a.n,
            "tag": a.tag,
            "state": a.state.value,
            "job_id": a.job_id,
            "slurm_state": a.slurm_state,
            "reason": a.reason,
            "exit_code": a.exit_code,
            "exit_signal": a.exit_signal,
            "nodes": a.nodes,
            "checkpoint": a.checkpoint,
            "submitted_at": a.submitted_at,
            "started_at": a.started_at,
            "ended_at": a.ended_at,
            "overrides": a.overrides,
        }
        for a in store.attempts(run.id)
    ]
    out["decisions"] = [
        {
            "at": d.at,
            "attempt": d.attempt,
            "rule": d.rule,
            "action": d.action,
            "reason": d.reason,
            "outcome": d.outcome,
            "evidence": d.evidence,
        }
        for d in store.decisions(run.id)
    ]
    out["silences"] = [
        {"target": s.target, "until": s.until, "by": s.actor}
        for s in Silences(store.db).active()
        if s.target in (run.id, run.name) or s.target.startswith(RULE_PREFIX)
    ]
    incident = store.open_incident(run.id)
    out["incident"] = (
        {"title": incident[0], "events": incident[1], "since": incident[2]} if incident else None
    )
    out["events"] = [
        {"at": e.at, "attempt": e.attempt, "kind": e.kind, "message": e.message} for e in store.events(run.id)
    ]
    out["changes"] = change_log(store.events(run.id), store.attempts(run.id))
    folder = latest_forensics(settings.runs_dir, run.id) if settings is not None else None
    out["forensics"] = _forensics(folder)
    out["wandb_url"] = store.wandb_url(run.id)  # the W&B run page the logs named (monitor.py)
    advice = measure_interval(store, run, time.time())  # Young/Daly's beside the interval in use
    tune = run.spec.checkpoint is not None and run.spec.checkpoint.tune_interval
    out["checkpoint_interval"] = (
        {**interval_json(advice), "lines": interval_lines(advice, tune=tune)} if advice else None
    )
    snap = store.load_progress(run.id)  # the monitor's latest progress and metrics snapshot
    out["progress"] = {"attempt": snap[0], "at": snap[1], **snap[2]} if snap else None
    return out


def _fmt_time(t: float | None) -> str:
    return time.strftime("%H:%M:%S", time.localtime(t)) if t else "-"


LOAD_FRESH_S = 300.0  # an older polling-load file was left by a daemon that is not running now


def polling_load_line(settings: Settings, now: float) -> str | None:
    """One line when the running daemon's polling budget cannot cover the base interval, else None."""
    try:
        load = json.loads(settings.watch_load_path.read_text())
        if load["covered"] or now - float(load["at"]) > LOAD_FRESH_S:
            return None
        demand, budget = float(load["demand_ops_per_s"]), float(load["budget_ops_per_s"])
        files, active, lag = int(load["files"]), int(load["active_files"]), float(load["lag_s"])
        return (
            f"watching: polling needs ~{demand:.0f} filesystem ops/s but its budget is {budget:.0f} "
            f"(watch.poll_budget_ops_per_s): {files} files, {active} active, looked at ~{lag:.0f} s late"
        )
    except (OSError, ValueError, KeyError, TypeError):  # no daemon yet, or a torn file: nothing to say
        return None


def cmd_status(args: argparse.Namespace) -> int:
    settings = settings_of(args)
    store = open_store(settings)
    try:
        return _status(args, settings, store)
    finally:
        store.close()  # `watch` and callers in one process (tests, scripts) ask again and again


def _status(args: argparse.Namespace, settings: Settings, store: Store) -> int:
    if args.run:
        try:
            run = run_named(store, args.run)
        except CliError:
            # Not in the store: still in the queue, or rejected at intake (a printed id is always findable).
            unclaimed = unclaimed_detail(settings, args.run)
            if unclaimed is None:
                raise
            if args.json:
                print(json.dumps(unclaimed, indent=2, default=str))
            else:
                print_unclaimed(unclaimed, settings)
            return 0
        detail = _run_detail(store, run, settings)
        if args.json:
            print(json.dumps(detail, indent=2, default=str))
            return 0
        _print_detail(detail)
        return 0
    now = time.time()
    try:
        since = parse_since(args.since, now) if args.since else None
    except ValueError as exc:
        return usage_error(str(exc))
    sel = Selection(active=args.active, needs_human=args.needs_human, since=since, newest=args.newest)
    filtered = sel != Selection()
    picked = select(store.list_runs(), sel, lambda r: waiting_in(store, r, now))
    runs = [_run_summary(store, r, w) for r, w in picked]
    # The spool (queued, rejected) is part of the plain list; a filter asks about runs only.
    queued, rejected, rejected_total = ([], [], 0) if filtered else waiting_and_rejected(settings)
    if args.json:
        print(json.dumps(runs + queued + rejected, indent=2, default=str))
        return 0
    print(lease_line(settings))
    load_line = polling_load_line(settings, now)
    if not runs:
        print("no runs" + (" match" if filtered else ""))
    else:
        print(f"{'RUN':<44} {'STATE':<10} {'JOB':>8} {'ATT':>3}  DETAIL")
    for r in runs:
        note = r["pending_reason"] or r["reason"] or ""
        if r["needs_human"]:
            note = f"NEEDS A PERSON: {r['needs_human']}"
        state = r["state"] + ("*" if r["held"] else "")
        mark = "!" if r["needs_human"] else " "
        print(f"{mark}{r['id']:<43} {state:<10} {r['slurm_job_id'] or '-':>8} {r['attempts']:>3}  {note}")
    if not filtered:
        print_waiting_and_rejected(settings, queued, rejected, rejected_total)
    if load_line:
        print(load_line)
    return 0


def lease_line(settings: Settings) -> str:
    """Which daemon acts for this root: the lease's holder (host:pid, generation) and how fresh it is."""
    return lease_text(settings)


def _print_detail(d: dict[str, Any]) -> None:
    print(f"run       {d['id']}  ({d['name']})")
    print(
        f"state     {d['state']}{' (held)' if d['held'] else ''}"
        + (f"  — {readable_actors(d['reason'])}" if d["reason"] else "")
    )
    if d["pending_reason"]:
        print(f"pending   {d['pending_reason']}")
    if d.get("needs_human"):
        print(f"NEEDS     a person: {d['needs_human']}")
    elif d["next_action_at"] and d["state"] == "BACKOFF":
        print(f"next      resubmission at {_fmt_time(d['next_action_at'])}")
    if d.get("wandb_url"):
        print(f"W&B       {d['wandb_url']}")
    if d.get("progress"):
        for i, line in enumerate(progress_lines(d["progress"])):
            print(f"{'progress' if i == 0 else '':<9} {line}")
    for i, line in enumerate((d.get("checkpoint_interval") or {}).get("lines") or []):
        print(f"{'interval' if i == 0 else '':<9} {line}")
    if d.get("incident"):
        inc = d["incident"]
        print(f"incident  open since {_fmt_time(inc['since'])}, {inc['events']} event(s): {inc['title']}")
    for sil in d.get("silences") or []:
        print(f"silenced  {sil['target']} until {_fmt_time(sil['until'])} (by {sil['by']}): alerts held back")
    print("attempts:")
    for a in d["attempt_list"]:
        extra = f" {describe_exit(a['exit_code'], a['exit_signal'])}" if a["exit_code"] is not None else ""
        ck = f" from {a['checkpoint']}" if a["checkpoint"] else ""
        print(
            f"  #{a['n']} job {a['job_id'] or '-'} {a['slurm_state'] or a['state']}{extra}"
            f"{' on ' + a['nodes'] if a['nodes'] else ''}{ck}"
        )
    if d["decisions"]:
        print("decisions:")
        for dec in d["decisions"]:
            print(
                f"  {_fmt_time(dec['at'])} attempt {dec['attempt']}: {dec['rule']} -> {dec['action']}: "
                f"{dec['reason']}" + (f" [{dec['outcome']}]" if dec["outcome"] else "")
            )
            for line in list(dec["evidence"].get("lines") or [])[-5:]:
                print(f"      | {str(line)[:160]}")
            for found in list(dec["evidence"].get("decisive") or [])[:1]:  # an end no rule recognised
                print(
                    f"      signature {found.get('signature')}  (`shepherd rules suggest {d['id']}`: a rule)"
                )
    if d.get("changes"):
        print("changes:")  # a person's --set, and each rule fix an attempt first carried
        for ch in d["changes"]:
            on = f"attempt {ch['attempt']}" if ch["attempt"] is not None else "next attempts"
            print(f"  {_fmt_time(ch['at'])} {ch['by']} ({on}): {ch['what']}")
    fx = d.get("forensics")
    if fx:
        print(f"forensics {fx.get('headline', '')}")
        for place in list(fx.get("stragglers") or [])[:5]:
            print(f"          elsewhere: {place}")
        print(f"          {fx['path']} (shepherd logs {d['id']} --source forensics)")
    print("events:")
    for e in d["events"][-15:]:
        print(f"  {_fmt_time(e['at'])} {e['kind']:<16} {readable_actors(e['message'])}")
