"""`shepherd logs`: any attempt's files, the one that failed first, and a follow that waits for a pending job
and goes on into the run's next attempts until the run ends."""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from supervisor.act.forensics import STACKS_TXT, SUMMARY_TXT, latest_forensics
from supervisor.cli.common import (
    EXIT_ERROR,
    EXIT_USAGE,
    AddCommand,
    CliError,
    open_store,
    run_named,
    settings_of,
)
from supervisor.domain.jobstate import JobState, describe_exit
from supervisor.domain.runs import AttemptRow, RunRow
from supervisor.settings import Settings
from supervisor.slurm.launchers import layout, runner
from supervisor.slurm.submit import base_log_dir
from supervisor.store import Store

FOLLOW_POLL_S = 0.5


def register(add: AddCommand) -> None:
    lg = add(
        "logs",
        cmd_logs,
        "print a run's log: the newest attempt's driver log, or the failed attempt's while the next waits",
    )
    lg.add_argument("run")
    lg.add_argument(
        "--follow",
        "-f",
        action="store_true",
        help="keep printing: waits for a pending job's first file, goes on into the next attempts (a marker "
        "line each), and ends when the run ends",
    )
    lg.add_argument("--attempt", type=int, metavar="N", help="attempt N's files (see `shepherd history`)")
    lg.add_argument("--tail", type=int, metavar="N", help="only the last N lines (then follow, with -f)")
    lg.add_argument("--grep", metavar="RE", help="only the lines matching the regular expression RE")
    lg.add_argument(
        "--source",
        help="part of the file name: head, worker, slurm, driver; or `forensics`: the stacks taken before a "
        "hang's cancel",
    )


# ---- which attempt and which file (no I/O) ----------------------------------------------------------------
def attempt_failed(a: AttemptRow) -> bool:
    """The attempt's job ended otherwise than COMPLETED with exit 0 (a failure, a timeout, a kill...)."""
    if a.ended_at is None or not a.job_id:
        return False
    state = JobState.from_slurm(a.slurm_state or "")
    return state != JobState.COMPLETED or bool(a.exit_code) or bool(a.exit_signal)


def default_attempt(attempts: Sequence[AttemptRow]) -> AttemptRow | None:
    """The attempt `logs RUN` shows: the newest that has started; so after a failure, the failed one until
    the next attempt runs (its job pending, held or not yet submitted). None: no attempt became a job."""
    jobs = [a for a in attempts if a.job_id]
    started = [a for a in jobs if a.started_at is not None or a.ended_at is not None]
    if started:
        return started[-1]
    return jobs[-1] if jobs else None


def pick_file(existing: Sequence[Path], source: str | None, *, ended: bool) -> Path | None:
    """The file of one attempt to show: with `source`, the last whose name holds it; else the driver's log,
    or (an attempt that ended without one: Ray never came up) the last file there is. None: wait for it."""
    if source:
        wanted = [f for f in existing if source in f.name]
        return wanted[-1] if wanted else None
    driver = [f for f in existing if f.name == layout.DRIVER_LOG]
    if driver:
        return driver[-1]
    return existing[-1] if ended and existing else None


def marker(a: AttemptRow) -> str:
    """The line printed where a followed run goes into another attempt (and above a failed attempt's log)."""
    bits = [f"attempt {a.n}", f"job {a.job_id or '-'}"]
    if a.overrides.get("runner") and int(a.overrides.get("driver_run") or 1) > 1:
        bits.append(f"driver run {a.overrides['driver_run']} (in place)")
    if a.checkpoint:
        bits.append(f"from {Path(a.checkpoint).name}")
    if a.ended_at is not None:
        end = a.slurm_state or "ended"
        if a.exit_code is not None:
            end += f" {describe_exit(a.exit_code, a.exit_signal)}"
        bits.append(end)
    return f"==> {', '.join(bits)} <=="


def driver_run_lines(data: bytes, run: int) -> bytes:
    """The lines of driver run `run` in a driver log the job's runner wrote several runs into: from its
    `driver run K starting` line up to the next run's (the runner's own lines about run K included)."""
    found = list(runner.RUN_STARTING_RE.finditer(data))
    starts, numbers = [m.start() for m in found], [int(m.group(1)) for m in found]
    if run not in numbers:
        return data if run == 1 and not numbers else b""
    i = numbers.index(run)
    begin = 0 if i == 0 else starts[i]
    end = starts[i + 1] if i + 1 < len(starts) else len(data)
    return data[begin:end]


def last_lines(data: bytes, n: int) -> bytes:
    """The last `n` lines of `data` (a last line without its newline counts)."""
    if n <= 0:
        return b""
    lines = data.splitlines(keepends=True)
    return b"".join(deque(lines, maxlen=n))


@dataclass
class LineFilter:
    """Passes whole lines matching `pattern` (all lines without one); holds a partial last line back until
    its newline arrives, so a followed file is filtered line by line however it was written."""

    pattern: re.Pattern[bytes] | None = None
    _partial: bytes = field(default=b"", repr=False)

    def feed(self, chunk: bytes) -> bytes:
        data = self._partial + chunk
        cut = data.rfind(b"\n") + 1
        self._partial = data[cut:]
        return self._keep(data[:cut])

    def flush(self) -> bytes:
        rest, self._partial = self._partial, b""
        return self._keep(rest)

    def _keep(self, data: bytes) -> bytes:
        if self.pattern is None or not data:
            return data
        return b"".join(line for line in data.splitlines(keepends=True) if self.pattern.search(line))


# ---- the files on disk ---------------------------------------------------------------------------------
def attempt_files(settings: Settings, run: RunRow, a: AttemptRow) -> list[Path]:
    """The attempt's files that exist now: Slurm's output file, then the Ray logs of its log folders."""
    if not a.job_id:
        return []
    base = base_log_dir(run.spec, settings.runs_dir / run.id)
    return [f for f in layout.log_files(base, a.job_id) if f.is_file()]


def attempt_file(settings: Settings, run: RunRow, a: AttemptRow, source: str | None) -> Path | None:
    return pick_file(attempt_files(settings, run, a), source, ended=a.ended_at is not None)


# ---- the command ----------------------------------------------------------------------------------------
def cmd_logs(args: argparse.Namespace) -> int:
    settings = settings_of(args)
    store = open_store(settings)
    run = run_named(store, args.run)
    if args.source == "forensics":
        return _print_forensics(settings, run)
    try:
        pattern = re.compile(args.grep.encode()) if args.grep else None
    except re.error as exc:
        print(f"shepherd: --grep {args.grep!r}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    attempts = store.attempts(run.id)
    if args.attempt is not None:
        chosen = next((a for a in attempts if a.n == args.attempt), None)
        if chosen is None:
            have = ", ".join(str(a.n) for a in attempts) or "none yet"
            raise CliError(f"{run.id} has no attempt {args.attempt} (attempts: {have})")
    else:
        chosen = default_attempt(attempts)
    shower = Shower(sys.stdout.buffer, LineFilter(pattern), args.tail)
    if args.follow:
        return follow(store, settings, run.id, chosen.n if chosen else 1, args.source, shower)
    if chosen is None or not chosen.job_id:
        raise CliError(f"no log files yet for {run.id}: no attempt has become a Slurm job")
    newest = attempts[-1]
    if chosen.n != newest.n and args.attempt is None:
        job = f"job {newest.job_id}" if newest.job_id else "not yet a job"
        print(
            f"shepherd: attempt {newest.n} ({job}) has not started; showing attempt {chosen.n}",
            file=sys.stderr,
        )
    target = attempt_file(settings, run, chosen, args.source)
    if target is None:
        what = f"no {args.source!r} file" if args.source else "no log file"
        raise CliError(
            f"{what} yet for attempt {chosen.n} of {run.id} (job {chosen.job_id}"
            f"{', ' + chosen.slurm_state if chosen.slurm_state else ''}); `-f` waits for it"
        )
    if attempt_failed(chosen):
        print(f"shepherd: {marker(chosen)}", file=sys.stderr)
    with target.open("rb") as fh:
        data = fh.read()
    if chosen.overrides.get("runner") and target.name == layout.DRIVER_LOG:  # one job, several driver runs
        data = driver_run_lines(data, int(chosen.overrides.get("driver_run") or 1))
    shower.first(data)
    shower.end()
    return 0


class Shower:
    """Writes what `logs` prints: --grep's lines, --tail's last lines of the first file, marker lines."""

    def __init__(self, out: BinaryIO, lines: LineFilter, tail: int | None) -> None:
        self.out, self.lines, self.tail = out, lines, tail

    def first(self, data: bytes) -> None:
        shown = self.lines.feed(data)
        self._write(last_lines(shown, self.tail) if self.tail is not None else shown)

    def more(self, data: bytes) -> None:
        self._write(self.lines.feed(data))

    def end(self) -> None:
        """The file ends here (a last line without its newline is shown now)."""
        self._write(self.lines.flush())

    def line(self, text: str) -> None:
        self._write(text.encode() + b"\n")

    def _write(self, data: bytes) -> None:
        if data:
            self.out.write(data)
            self.out.flush()


def follow(
    store: Store,
    settings: Settings,
    run_id: str,
    start: int,
    source: str | None,
    shower: Shower,
    *,
    sleep: Callable[[float], None] = time.sleep,
    say: Callable[[str], None] = lambda s: print(f"shepherd: {s}", file=sys.stderr),
) -> int:
    """Print attempt `start`'s file and everything written to it, then each later attempt's, with a marker
    line before each; wait (saying so once) while an attempt has no file yet; end once the run has ended and
    its last attempt's file is read to the end."""
    n, first, waiting_said = start, True, ""
    while True:
        run, a = store.get_run(run_id), store.get_attempt(run_id, n)
        if run is None:
            raise CliError(f"{run_id} is gone from the store")
        later = store.get_attempt(run_id, n + 1)
        target = attempt_file(settings, run, a, source) if a is not None else None
        if target is None:
            if a is not None and a.ended_at is not None and later is not None:
                shower.line(marker(a) + " (no log file)")
                n, first = n + 1, False
                continue
            if run.state.is_final and (a is None or later is None):
                say(f"{run_id} is {run.state.value}" + (f" ({run.final_reason})" if run.final_reason else ""))
                return 0
            why = _waiting_for(a, source)
            if why != waiting_said:
                say(why)
                waiting_said = why
            sleep(FOLLOW_POLL_S)
            continue
        assert a is not None
        shower.line(marker(a))
        _stream_until_moved_on(store, run_id, a, target, shower, first=first, sleep=sleep, say=say)
        first, waiting_said = False, ""
        run = store.get_run(run_id)
        if store.get_attempt(run_id, n + 1) is None and run is not None and run.state.is_final:
            say(f"{run_id} is {run.state.value}" + (f" ({run.final_reason})" if run.final_reason else ""))
            return 0
        n += 1


def _waiting_for(a: AttemptRow | None, source: str | None) -> str:
    what = f"a {source!r} file" if source else "its log"
    if a is not None and a.ended_at is not None:
        return f"attempt {a.n} ended ({a.slurm_state or a.state.value}) without {what}; waiting for the next"
    if a is None or not a.job_id:
        return f"waiting for the next attempt to be submitted, then for {what}"
    state = a.slurm_state or a.state.value.lower()  # not yet seen in Slurm: "submitted"
    reason = f": {a.reason}" if a.reason and a.reason != "None" else ""
    return f"waiting for attempt {a.n} (job {a.job_id}, {state}{reason}) to write {what}"


def _stream_until_moved_on(
    store: Store,
    run_id: str,
    a: AttemptRow,
    target: Path,
    shower: Shower,
    *,
    first: bool,
    sleep: Callable[[float], None],
    say: Callable[[str], None],
) -> None:
    """Print `target` and what is appended to it until the attempt is over (a later attempt exists, or the
    run ended), then whatever the file still holds."""
    said_ended = False
    with target.open("rb") as fh:
        data = fh.read()
        (shower.first if first else shower.more)(data)
        while True:
            run, later = store.get_run(run_id), store.get_attempt(run_id, a.n + 1)
            over = later is not None or run is None or run.state.is_final
            chunk = fh.read()
            if chunk:
                shower.more(chunk)
                continue
            if over:
                shower.end()
                return
            now = store.get_attempt(run_id, a.n)
            if not said_ended and now is not None and now.ended_at is not None:
                said_ended = True
                say(f"attempt {a.n} ended ({now.slurm_state or now.state.value}); waiting for the next")
            sleep(FOLLOW_POLL_S)


def _print_forensics(settings: Settings, run: RunRow) -> int:
    """The newest hang's summary, every process's stacks, then nvidia-smi / ray status per node."""
    folder = latest_forensics(settings.runs_dir, run.id)
    if folder is None:
        print(
            f"shepherd: no forensics for {run.id} (they are taken when a hung job is cancelled)",
            file=sys.stderr,
        )
        return EXIT_ERROR
    for f in [folder / SUMMARY_TXT, folder / STACKS_TXT, *sorted(folder.glob("node-*.txt"))]:
        if f.is_file():
            print(f"==> {f} <==")
            sys.stdout.write(f.read_text(errors="replace"))
    print(f"==> the log tails and each node's raw answer: {folder}")
    return 0
