"""`shepherd watch [RUN] [--once]`: a live view of the runs waiting for a person (on top, marked, with the
command that moves each on) and of the active runs, read from the daemon's store.

Everything shown comes from SQLite (runs, attempts, decisions and the monitor's
progress snapshot), opened read-only: watching never competes with the daemon
for the write lock and works from any login shell that can read the state root.
A terminal gets a rich table with progress bars, redrawn every ~2 s; a pipe or
a log gets plain lines (one per run), printed again only when they change.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TextIO

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from supervisor.act.control import find_run
from supervisor.cli.attention import Selection, Waiting, select, waiting_in
from supervisor.cli.common import AddCommand, settings_of
from supervisor.domain.runs import DecisionRow, RunRow
from supervisor.ports import ControlError
from supervisor.store import Store
from supervisor.watch.metric_names import TRAIN_REWARD, VAL_ACCURACY

REFRESH_S = 2.0
REWARD_TAG = TRAIN_REWARD
VAL_TAG = VAL_ACCURACY
ROLLOUT_WORDS = ("rollout", "generat", "sampl", "collect")
TRAIN_WORDS = ("step", "train", "epoch")


# ---- reading the progress snapshot ----
@dataclass(frozen=True, slots=True)
class Counter:
    label: str
    done: float
    total: float | None

    def text(self) -> str:
        total = f"/{_num(self.total)}" if self.total else ""
        return f"{_num(self.done)}{total}"


def _num(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else f"{v:.4g}"


def _bars(progress: Mapping[str, Any]) -> list[Counter]:
    out = []
    for key, bar in progress.items():
        if key.startswith("bar:") and isinstance(bar, Mapping) and isinstance(bar.get("n"), int | float):
            total = bar.get("total")
            out.append(
                Counter(key[4:], float(bar["n"]), float(total) if isinstance(total, int | float) else None)
            )
    return out


def _status(progress: Mapping[str, Any]) -> Mapping[str, Any]:
    st = progress.get("status")
    return st if isinstance(st, Mapping) else {}


def training(progress: Mapping[str, Any]) -> Counter | None:
    """Training steps: the trainer's status.json when it writes one, else NeMo RL's step banner, else a
    step-like tqdm bar."""
    st = _status(progress)
    if isinstance(st.get("step"), int | float):
        total = st.get("total_steps")
        return Counter("step", float(st["step"]), float(total) if isinstance(total, int | float) else None)
    banner = progress.get("step")  # NeMo RL's `Step N/M` banner in its driver log
    if isinstance(banner, Mapping) and isinstance(banner.get("n"), int | float):
        total = banner.get("total")
        return Counter("step", float(banner["n"]), float(total) if isinstance(total, int | float) else None)
    for bar in _bars(progress):
        if any(w in bar.label.lower() for w in TRAIN_WORDS) and not _is_rollout(bar.label):
            return bar
    return None


def _is_rollout(label: str) -> bool:
    return any(w in label.lower() for w in ROLLOUT_WORDS)


def rollouts(progress: Mapping[str, Any]) -> Counter | None:
    """Rollout collection in the current step: a generation bar, else status.json's phase counters."""
    for bar in _bars(progress):
        if _is_rollout(bar.label):
            return bar
    st = _status(progress)
    if isinstance(st.get("phase_done"), int | float):
        total = st.get("phase_total")
        label = str(st.get("phase") or "phase")
        return Counter(
            label, float(st["phase_done"]), float(total) if isinstance(total, int | float) else None
        )
    return None


def metric(progress: Mapping[str, Any], tag: str) -> tuple[float, int | None] | None:
    """(value, step) of a tag (Shepherd's name: the monitor stores them so): the step its own value was logged
    at; a snapshot from before `metric_steps` has only the newest row's step, so it shows no step."""
    m = progress.get("metrics")
    if not isinstance(m, Mapping) or not isinstance(m.get(tag), int | float):
        return None
    steps = progress.get("metric_steps")
    step = steps.get(tag) if isinstance(steps, Mapping) else None
    return float(m[tag]), int(step) if isinstance(step, int | float) else None


def _metric_text(progress: Mapping[str, Any], tag: str) -> str:
    got = metric(progress, tag)
    if got is None:
        return "-"
    value, step = got
    return f"{value:.4g}" + (f" @{step}" if step is not None else "")


def progress_lines(progress: Mapping[str, Any]) -> list[str]:
    """The snapshot as a few human lines (used by `shepherd status RUN`)."""
    lines = []
    tr, ro = training(progress), rollouts(progress)
    phase = _status(progress).get("phase")
    if tr is not None:
        lines.append(f"{tr.label} {tr.text()}" + (f" ({phase})" if phase else ""))
    if ro is not None:
        lines.append(f"{ro.label} {ro.text()}")
    m = progress.get("metrics")
    if isinstance(m, Mapping):
        shown = [t for t in (REWARD_TAG, VAL_TAG) if metric(progress, t)] or [t for t in m if t != "step"][:4]
        if shown:
            lines.append("; ".join(f"{t} {_metric_text(progress, t)}" for t in shown))
    at = progress.get("at")
    if isinstance(at, int | float):
        lines.append(
            f"as of {time.strftime('%H:%M:%S', time.localtime(at))} (attempt {progress.get('attempt')})"
        )
    return lines


# ---- one frame ----
@dataclass(frozen=True, slots=True)
class RunView:
    id: str
    state: str
    job_id: str | None
    slurm_state: str | None
    pending_reason: str | None
    attempt: int
    progress: Mapping[str, Any]
    progress_at: float | None
    last_decision: str | None
    needs_person: str | None = None  # why the run waits for a person, and the command that moves it on


def _last_decision(decisions: list[DecisionRow]) -> str | None:
    acting = [d for d in decisions if d.action != "none"]
    if not acting:
        return None
    d = acting[-1]
    when = time.strftime("%H:%M:%S", time.localtime(d.at))
    return f"{when} {d.rule} -> {d.outcome or d.action}"


def view_of(store: Store, run: RunRow, wait: Waiting | None = None) -> RunView:
    latest = store.latest_attempt(run.id)
    try:
        snap = store.load_progress(run.id)
    except sqlite3.OperationalError:  # a store from before the progress table
        snap = None
    pending = latest.reason if latest and latest.slurm_state == "PENDING" else None
    if run.state.value == "BACKOFF" and run.next_action_at and not run.held:
        pending = f"resubmits at {time.strftime('%H:%M:%S', time.localtime(run.next_action_at))}"
    return RunView(
        id=run.id,
        state=run.state.value + (" (held)" if run.held else ""),
        job_id=latest.job_id if latest else None,
        slurm_state=latest.slurm_state if latest else None,
        pending_reason=pending,
        attempt=latest.n if latest else 0,
        progress=snap[2] if snap else {},
        progress_at=snap[1] if snap else None,
        last_decision=_last_decision(store.decisions(run.id)),
        needs_person=wait.text() if wait else None,
    )


def collect(store: Store, run_ref: str | None = None) -> list[RunView]:
    """The runs waiting for a person first (ended ones too: a stopped run waits for days), then the active
    runs; or just `run_ref`, whatever its state."""
    now = time.time()
    if run_ref:
        run = find_run(store, run_ref)
        return [view_of(store, run, waiting_in(store, run, now))]
    picked = select(store.list_runs(), Selection(active=True), lambda r: waiting_in(store, r, now))
    return [view_of(store, r, w) for r, w in picked]


def plain_lines(views: list[RunView]) -> list[str]:
    if not views:
        return ["no active runs"]
    out = []
    for v in views:
        if v.needs_person:
            out.append(
                f"!! {v.id}  {v.state}  job {v.job_id or '-'}#{v.attempt}  NEEDS A PERSON: {v.needs_person}"
            )
            continue
        bits = [v.id, v.state, f"job {v.job_id or '-'}#{v.attempt}"]
        tr, ro = training(v.progress), rollouts(v.progress)
        if tr is not None:
            bits.append(f"{tr.label} {tr.text()}")
        if ro is not None:
            bits.append(f"{ro.label} {ro.text()}")
        bits.append(f"reward {_metric_text(v.progress, REWARD_TAG)}")
        bits.append(f"val {_metric_text(v.progress, VAL_TAG)}")
        if v.pending_reason:
            bits.append(f"pending: {v.pending_reason}")
        if v.last_decision:
            bits.append(f"last: {v.last_decision}")
        out.append("  ".join(bits))
    return out


def _bar_cell(c: Counter | None) -> RenderableType:
    if c is None:
        return Text("-", style="dim")
    grid = Table.grid(padding=(0, 1))
    grid.add_row(
        ProgressBar(total=c.total or None, completed=c.done, width=12),
        Text(c.text(), style="bold"),
    )
    return Group(Text(c.label, style="dim"), grid)


def render(views: list[RunView], now: float | None = None) -> RenderableType:
    now = time.time() if now is None else now
    table = Table(title=f"shepherd — {time.strftime('%H:%M:%S', time.localtime(now))}", expand=True)
    for col in ("run", "state", "training", "rollouts", REWARD_TAG, VAL_TAG, "last decision"):
        table.add_column(col, overflow="fold")
    if not views:
        return Group(table, Text("no active runs", style="dim"))
    for v in views:
        state = Text(v.state, style="green" if v.state == "RUNNING" else "yellow")
        if v.needs_person:
            state = Text(f"!! {v.state}\nneeds a person", style="bold red")
        if v.pending_reason:
            state.append(f"\n{v.pending_reason}", style="dim")
        if v.progress_at is not None and now - v.progress_at > 60:
            state.append(f"\nsnapshot {now - v.progress_at:.0f}s old", style="dim")
        table.add_row(
            Text(f"{v.id}\njob {v.job_id or '-'} #{v.attempt}"),
            state,
            _bar_cell(training(v.progress)),
            _bar_cell(rollouts(v.progress)),
            _metric_text(v.progress, REWARD_TAG),
            _metric_text(v.progress, VAL_TAG),
            v.last_decision or "-",
        )
    waiting = [v for v in views if v.needs_person]
    if not waiting:
        return table
    lines = Text("needs a person:", style="bold red")
    for v in waiting:
        lines.append(f"\n!! {v.id}: {v.needs_person}", style="red")
    return Group(lines, table)


# ---- the command ----
def register(add: AddCommand) -> None:
    w = add("watch", watch, "a live view of the runs that need a person (on top) and the active runs")
    w.add_argument("run", nargs="?")
    w.add_argument("--once", action="store_true", help="print one frame and exit")


def watch(args: argparse.Namespace, out: TextIO | None = None, refresh_s: float = REFRESH_S) -> int:
    stream = out or sys.stdout
    settings = settings_of(args)
    if not settings.db_path.exists():
        print(
            f"shepherd: no state at {settings.db_path} (is the daemon running with this --root?)",
            file=sys.stderr,
        )
        return 1
    store = Store.open_readonly(settings.db_path)
    run_ref: str | None = getattr(args, "run", None)
    try:
        views = collect(store, run_ref)
        if not stream.isatty():
            return _plain_loop(store, run_ref, views, stream, once=args.once, refresh_s=refresh_s)
        console = Console(file=stream)
        if args.once:
            console.print(render(views))
            return 0
        with Live(render(views), console=console, refresh_per_second=4, transient=False) as live:
            while True:
                time.sleep(refresh_s)
                live.update(render(collect(store, run_ref)))
    except ControlError as exc:
        print(f"shepherd: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        store.close()


def _plain_loop(
    store: Store, run_ref: str | None, views: list[RunView], stream: TextIO, *, once: bool, refresh_s: float
) -> int:
    """Not a terminal: plain lines, and a new block only when something changed (no log spam)."""
    last: list[str] | None = None
    while True:
        lines = plain_lines(views)
        if lines != last:
            if last is not None:
                print(f"-- {time.strftime('%H:%M:%S')}", file=stream)
            print("\n".join(lines), file=stream, flush=True)
            last = lines
        if once:
            return 0
        time.sleep(refresh_s)
        views = collect(store, run_ref)
