"""The `shepherd` command. Thin: every verb calls the same code the daemon and Slack use."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import anyio

from supervisor.domain.runs import RunRow
from supervisor.domain.spec import check_spec_files, load_spec
from supervisor.domain.yamlpos import YamlDocumentError
from supervisor.notify.silences import RULE_PREFIX, Silences
from supervisor.settings import Settings, load_settings
from supervisor.store import Store

EXIT_USAGE = 2
EXIT_ERROR = 1


class CliError(Exception):
    pass


def _settings(args: argparse.Namespace) -> Settings:
    return load_settings(Path(args.root).resolve() if args.root else None)


def find_run(store: Store, ref: str) -> RunRow:
    """The run `ref` names (id, name or id prefix), or a CliError saying why not."""
    from supervisor.act.control import Controller
    from supervisor.ports import ControlError

    try:
        return Controller(store, None).find(ref)
    except ControlError as exc:
        raise CliError(str(exc)) from exc


def _store(settings: Settings) -> Store:
    if not settings.db_path.exists():
        settings.ensure_dirs()
    return Store(settings.db_path)


# ---- submit ------------------------------------------------------------------------------------------------
def cmd_submit(args: argparse.Namespace) -> int:
    from supervisor.intake.queue import new_run_id

    settings = _settings(args)
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
    settings.queue_dir.mkdir(parents=True, exist_ok=True)
    run_id = new_run_id(spec.name, time.time())
    tmp = settings.queue_dir / f".{run_id}.yaml.tmp"
    data = path.read_bytes()
    if spec.workdir is None:
        # Like sbatch: a job runs where it was submitted from, unless the spec says otherwise.
        data = data.rstrip(b"\n") + b"\n" + f"workdir: {json.dumps(str(Path.cwd()))}\n".encode()
    tmp.write_bytes(data)
    os.replace(tmp, settings.queue_dir / f"{run_id}.yaml")  # atomic: the daemon never sees half a file
    print(run_id)
    return 0


# ---- status ------------------------------------------------------------------------------------------------
def _run_summary(store: Store, run: RunRow) -> dict[str, Any]:
    attempts = store.attempts(run.id)
    latest = attempts[-1] if attempts else None
    return {
        "id": run.id,
        "name": run.name,
        "state": run.state.value,
        "held": run.held,
        "slurm_job_id": latest.job_id if latest else None,
        "slurm_state": latest.slurm_state if latest else None,
        "pending_reason": latest.reason if latest and latest.slurm_state == "PENDING" else None,
        "exit_code": latest.exit_code if latest else None,
        "attempts": len(attempts),
        "reason": run.final_reason,
        "next_action_at": run.next_action_at,
        "created_at": run.created_at,
    }


def _run_detail(store: Store, run: RunRow) -> dict[str, Any]:
    out = _run_summary(store, run)
    out["attempt_list"] = [
        {
            "n": a.n,
            "tag": a.tag,
            "state": a.state.value,
            "job_id": a.job_id,
            "slurm_state": a.slurm_state,
            "reason": a.reason,
            "exit_code": a.exit_code,
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
    snap = store.load_progress(run.id)  # the monitor's latest progress and metrics snapshot
    out["progress"] = {"attempt": snap[0], "at": snap[1], **snap[2]} if snap else None
    return out


def _fmt_time(t: float | None) -> str:
    return time.strftime("%H:%M:%S", time.localtime(t)) if t else "-"


def cmd_status(args: argparse.Namespace) -> int:
    settings = _settings(args)
    store = _store(settings)
    if args.run:
        detail = _run_detail(store, find_run(store, args.run))
        if args.json:
            print(json.dumps(detail, indent=2, default=str))
            return 0
        _print_detail(detail)
        return 0
    runs = [_run_summary(store, r) for r in store.list_runs()]
    if args.json:
        print(json.dumps(runs, indent=2, default=str))
        return 0
    if not runs:
        print("no runs")
        return 0
    print(f"{'RUN':<44} {'STATE':<10} {'JOB':>8} {'ATT':>3}  DETAIL")
    for r in runs:
        note = r["pending_reason"] or r["reason"] or ""
        state = r["state"] + ("*" if r["held"] else "")
        print(f"{r['id']:<44} {state:<10} {r['slurm_job_id'] or '-':>8} {r['attempts']:>3}  {note}")
    return 0


def _print_detail(d: dict[str, Any]) -> None:
    print(f"run       {d['id']}  ({d['name']})")
    print(
        f"state     {d['state']}{' (held)' if d['held'] else ''}"
        + (f"  — {d['reason']}" if d["reason"] else "")
    )
    if d["pending_reason"]:
        print(f"pending   {d['pending_reason']}")
    if d["next_action_at"] and d["state"] == "BACKOFF":
        print(f"next      resubmission at {_fmt_time(d['next_action_at'])}")
    if d.get("progress"):
        from supervisor.cli.watch import progress_lines

        for i, line in enumerate(progress_lines(d["progress"])):
            print(f"{'progress' if i == 0 else '':<9} {line}")
    if d.get("incident"):
        inc = d["incident"]
        print(f"incident  open since {_fmt_time(inc['since'])}, {inc['events']} event(s): {inc['title']}")
    for sil in d.get("silences") or []:
        print(f"silenced  {sil['target']} until {_fmt_time(sil['until'])} (by {sil['by']}): alerts held back")
    print("attempts:")
    for a in d["attempt_list"]:
        extra = f" exit {a['exit_code']}" if a["exit_code"] is not None else ""
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
    print("events:")
    for e in d["events"][-15:]:
        print(f"  {_fmt_time(e['at'])} {e['kind']:<16} {e['message']}")


# ---- actions -----------------------------------------------------------------------------------------------
def _controller(settings: Settings, store: Store) -> Any:
    from supervisor.act.control import Controller
    from supervisor.slurm.client import SlurmClient

    slurm = SlurmClient(timeout_s=settings.slurm.command_timeout_s, bin_dir=settings.slurm.bin_dir)
    resolver = _checkpoint_resolver(settings)
    return Controller(store, slurm, resolve_checkpoint=resolver) if resolver else Controller(store, slurm)


def _checkpoint_resolver(settings: Settings) -> Any:
    try:
        from supervisor.act.actions import resolve_checkpoint_for_run
    except ImportError:
        return None
    return resolve_checkpoint_for_run


def _act(args: argparse.Namespace, verb: Callable[[Any], Any]) -> int:
    from supervisor.ports import ControlError
    from supervisor.slurm.client import SlurmError

    settings = _settings(args)
    store = _store(settings)
    ctl = _controller(settings, store)
    try:
        message = anyio.run(lambda: verb(ctl))
    except ControlError as exc:
        print(f"shepherd: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except SlurmError as exc:
        print(f"shepherd: slurm: {exc}", file=sys.stderr)
        return EXIT_ERROR
    print(message)
    return 0


def _actor() -> str:
    return f"cli:{os.environ.get('USER') or os.getuid()}"


def cmd_cancel(args: argparse.Namespace) -> int:
    return _act(args, lambda c: c.cancel(args.run, _actor()))


def cmd_hold(args: argparse.Namespace) -> int:
    return _act(args, lambda c: c.hold(args.run, _actor()))


def cmd_release(args: argparse.Namespace) -> int:
    return _act(args, lambda c: c.release(args.run, _actor()))


def cmd_resume(args: argparse.Namespace) -> int:
    which = args.checkpoint
    if which not in ("latest", "best") and not (which.startswith("step_") and which[5:].isdigit()):
        print("shepherd: checkpoint must be latest, best or step_N", file=sys.stderr)
        return EXIT_USAGE
    return _act(args, lambda c: c.resume(args.run, which, _actor()))


# ---- logs --------------------------------------------------------------------------------------------------
def log_files(store: Store, settings: Settings, run: RunRow) -> list[Path]:
    from supervisor.domain.spec import JobSpec
    from supervisor.slurm.submit import base_log_dir

    spec = JobSpec.model_validate_json(run.spec_json)
    base = base_log_dir(spec, settings.runs_dir / run.id)
    files: list[Path] = []
    for a in store.attempts(run.id):
        if not a.job_id:
            continue
        files.append(base / f"slurm-{a.job_id}.out")
        for d in sorted(base.glob(f"{a.job_id}-*logs")):
            files.extend(sorted(d.glob("ray-*.log")))
    return files


def cmd_logs(args: argparse.Namespace) -> int:
    settings = _settings(args)
    store = _store(settings)
    run = find_run(store, args.run)
    files = log_files(store, settings, run)
    wanted = [f for f in files if args.source in f.name] if args.source else files
    if not wanted:
        print(f"shepherd: no log files yet for {run.id}", file=sys.stderr)
        return EXIT_ERROR
    # The newest attempt's driver log is what people want; show the others with --source.
    target = (
        next((f for f in reversed(wanted) if f.name == "ray-driver.log"), wanted[-1])
        if not args.source
        else wanted[-1]
    )
    if not target.exists():
        print(f"shepherd: {target} does not exist yet", file=sys.stderr)
        return EXIT_ERROR
    with target.open("rb") as fh:
        sys.stdout.buffer.write(fh.read())
        sys.stdout.flush()
        while args.follow:
            chunk = fh.read()
            if chunk:
                sys.stdout.buffer.write(chunk)
                sys.stdout.flush()
            else:
                time.sleep(0.5)
    return 0


# ---- daemon ------------------------------------------------------------------------------------------------
def cmd_daemon(args: argparse.Namespace) -> int:
    from supervisor.daemon.compose import run_daemon

    settings = _settings(args)
    return run_daemon(settings, log_format=args.log_format)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="shepherd", description="Supervise GRPO runs on Slurm + Ray.")
    p.add_argument(
        "--root", default=None, help="state root (default: $SHEPHERD_ROOT or ~/.local/state/shepherd)"
    )
    sub = p.add_subparsers(dest="command", required=True)

    def add(name: str, fn: Callable[[argparse.Namespace], int], help_: str) -> argparse.ArgumentParser:
        sp = sub.add_parser(name, help=help_)
        sp.add_argument("--root", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
        sp.set_defaults(func=fn)
        return sp

    d = add("daemon", cmd_daemon, "run the supervisor daemon")
    d.add_argument("--log-format", choices=["auto", "json", "pretty"], default="auto")
    s = add("submit", cmd_submit, "validate a spec and queue it; prints the run id")
    s.add_argument("spec")
    st = add("status", cmd_status, "show runs, or one run in detail")
    st.add_argument("run", nargs="?")
    st.add_argument("--json", action="store_true")
    for name, fn, h in (
        ("cancel", cmd_cancel, "cancel a run"),
        ("hold", cmd_hold, "hold a run's pending job"),
        ("release", cmd_release, "release a held run"),
    ):
        add(name, fn, h).add_argument("run")
    r = add("resume", cmd_resume, "resubmit a run from a checkpoint")
    r.add_argument("run")
    r.add_argument("checkpoint", nargs="?", default="latest", help="latest | best | step_N")
    lg = add("logs", cmd_logs, "print a run's log (driver log of the newest attempt by default)")
    lg.add_argument("run")
    lg.add_argument("--follow", "-f", action="store_true")
    lg.add_argument("--source", help="part of the file name: head, worker, slurm, driver")
    _add_extensions(sub, add)
    return p


def _add_extensions(sub: Any, add: Callable[..., argparse.ArgumentParser]) -> None:
    """Subcommands provided by other modules (rules, plot, watch, service)."""
    try:
        from supervisor.cli.extra import register
    except ImportError:
        return
    register(sub, add)


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
