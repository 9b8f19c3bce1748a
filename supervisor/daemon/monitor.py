"""Watch every active attempt and feed what it shows into the rules engine.

For each attempt whose job may be alive: its Slurm output file and
`<jobid>-logs/` folder (inotify, or polling on shared filesystems), the
trainer's status.json and metrics.jsonl (or, when it writes none, its
TensorBoard event files), the clock, and the Slurm states the poller reports.
Lines, metrics.jsonl rows and TensorBoard records are read from a persisted cursor and the cursor
is saved only after what they matched was dispatched, so a restart neither
re-reads nor misses anything; a match that is seen twice is still decided once
(the store's unique decision index).

No file can block the event loop: reading and matching an attempt's log files runs in a worker thread
(RE2 releases the GIL while it matches; Python code yields it every few milliseconds), one attempt at a
time under a lock, so the daemon's other loops keep beating while the worst input is processed; a
TensorBoard backlog is read a bounded number of bytes per tick.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import anyio.to_thread
import structlog

from supervisor.act import inplace
from supervisor.act.actions import Actions
from supervisor.decide.inplace import RUNNER_SETTLE_S
from supervisor.domain.jobstate import JobState
from supervisor.domain.notices import Notice
from supervisor.domain.observations import MetricEvent, ProgressEvent, StateEvent, Tick
from supervisor.domain.overrides import resume_step
from supervisor.domain.runs import AttemptRow, AttemptState, RunRow
from supervisor.domain.spec import JobSpec
from supervisor.domain.trainer_files import EXP_DIR_RE, METRICS_FILE, STATUS_FILE, TENSORBOARD_DIR
from supervisor.rules.engine import (
    Match,
    MatcherState,
    RuleSet,
    feed,
    load_ruleset,
    note_files,
    scan_lines,
    spec_ruleset,
)
from supervisor.rules.rhythm import Rhythm
from supervisor.service.watchdog import HeartbeatRegistry
from supervisor.settings import Settings, WatchSettings
from supervisor.slurm.launchers import layout, runner
from supervisor.slurm.launchers import shepherd as shepherd_launcher
from supervisor.slurm.launchers.layout import FileContract
from supervisor.slurm.submit import attempt_log_base, file_contract
from supervisor.store import Store
from supervisor.watch.driver_log import (
    CheckpointSaving,
    DriverLogReader,
    Scalar,
    StepStarted,
    ValidationStarted,
)
from supervisor.watch.fswatch import ChangeSource, Mode
from supervisor.watch.lines import SEGMENT_SEP
from supervisor.watch.marks import End, Mark, MarkOp, MarkTracker, Step
from supervisor.watch.metric_names import TRAIN_REWARD
from supervisor.watch.metrics import MetricsReader, to_metric_events
from supervisor.watch.pollplan import Cadence, PollLoad
from supervisor.watch.progress import StatusReader, bar_event, parse_tqdm
from supervisor.watch.sources import MetricSource, metric_source
from supervisor.watch.tailer import FileCursor, Follower, TailResult
from supervisor.watch.tbevents import TensorBoardWatcher, newest_exp_dir
from supervisor.watch.tbevents import to_metric_events as tb_metric_events
from supervisor.watch.wandb_link import wandb_run_url

log = structlog.get_logger(__name__)

DRAIN_AFTER_END_S = 15.0  # keep reading an ended attempt's files this long: the last lines land late
REFRESH_EVERY_S = 10.0
ENDED_STALL_SOURCE = "shepherd-monitor"  # the source name of the line the ENDED check feeds the rules
RHYTHM_KEY = "rhythm"  # the progress snapshot's entry for what a run's rhythm taught (rules/rhythm.py)
LOAD_EVERY_S = 10.0  # how often the polling load is written for `shepherd status`
OVER_BUDGET_REPEAT_S = 600.0  # an over-budget warning is repeated this often while it lasts


def cadence_of(w: WatchSettings) -> Cadence:
    """The polling plan's cadence from the settings (listings: 5x and 30x the base interval)."""
    return Cadence.scaled(w.poll_interval_s, ops_per_s=w.poll_budget_ops_per_s, max_s=w.poll_max_interval_s)


class StoreCursors:
    """The tailer's CursorStore on the daemon's SQLite store; inside `batch()` saves are gathered and
    written in one transaction when it ends (a round of changes of many runs is one commit, not one per
    file)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.pending: dict[str, tuple[int, int, int]] | None = None

    def load(self, path: str) -> FileCursor | None:
        row = self.store.load_cursor(path)
        return FileCursor(*row) if row else None

    def save(self, path: str, cursor: FileCursor) -> None:
        self.save_many({path: cursor})

    def save_many(self, cursors: dict[str, FileCursor]) -> None:
        rows = {path: (c.inode, c.offset, c.line_no) for path, c in cursors.items()}
        if self.pending is not None:
            self.pending.update(rows)
        elif rows:
            self.store.save_cursors(rows)

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Gather saves until the block ends (a save still happens after what it covers was dispatched:
        only later, by the rest of the round). Nested blocks join the outer one."""
        if self.pending is not None:
            yield
            return
        self.pending = {}
        try:
            yield
        finally:
            rows, self.pending = self.pending, None
            if rows:
                self.store.save_cursors(rows)


@dataclass
class AttemptWatch:
    run_id: str
    n: int
    job_id: str
    spec: JobSpec
    rules: RuleSet
    state: MatcherState
    log_base: Path
    files: set[str] = field(default_factory=set)
    status: StatusReader | None = None
    metrics: MetricsReader | None = None
    metrics_saved: FileCursor | None = None  # the metrics.jsonl cursor last staged for saving
    tb: TensorBoardWatcher | None = None  # the trainer's event files, read when it writes no metrics.jsonl
    contract: FileContract = shepherd_launcher.CONTRACT  # what its launcher's files mean
    mode: Mode = "inotify"  # how all its paths are watched: polled (shared filesystem) or inotify
    trainer_paths: set[str] = field(default_factory=set)  # polled: the trainer's files and folders watched
    trainer_due: bool = True  # polled: a trainer file changed since `read_trainer` last ran
    output: Path | None = None  # Slurm's output file, when not the launcher's usual one (an adopted job)
    source: MetricSource | None = None  # where this attempt's scalars come from, once known
    driver_log: DriverLogReader = field(default_factory=DriverLogReader)  # NeMo RL's banners and results
    tb_rescan: bool = True  # list the event files again on the next read (with the log files' re-listing)
    tb_saved: dict[str, tuple[int, int]] = field(default_factory=dict)  # event file -> (inode, offset) saved
    # When Slurm started its job (None: not yet): the trainer's metrics files are shared by a run's attempts,
    # and what they hold from before is the last attempt's (see read_trainer)
    started_at: float | None = None
    ended_at: float | None = None
    refreshed_at: float = 0.0
    progress: dict[str, object] = field(default_factory=dict)
    unread: set[str] = field(default_factory=set)  # newly watched files, to read once from their cursor
    driver_exited_at: float | None = None  # when the launcher said the driver exited (ENDED should follow)
    ended_alarm: bool = False
    marks: MarkTracker = field(default_factory=lambda: MarkTracker(None, 0.0))  # for `shepherd report`
    open_marks: dict[str, int] = field(default_factory=dict)  # stretch kind -> its mark row
    wandb_url: str | None = None  # the W&B run page its logs named (read off the loop, recorded on it)
    wandb_noted: str | None = None  # the one recorded and announced
    driver_run: int | None = None  # its driver run within the job, when it runs under Shepherd's runner
    runner_key: str = ""  # what the runner's folders are named after (runner.runner_key)
    driver_exit_seen: float | None = None  # when the runner's report of the driver's exit was first read
    answered: bool = False  # the runner has its word for this driver run (or a decision gives it)
    # the runner's folder the two fields above are about (a requeue: a new one)
    runner_dir: Path | None = None
    # The runner said the job's next driver run starts (a restart in place): the lines from here on in the
    # driver log they share are the next attempt's, so this one reads nothing more and is dropped at once.
    superseded: bool = False
    # A restart in place while this daemon watched the previous driver run: in these files (there when this
    # watch began, or the previous watch's; those that hold the driver's output count), the lines before the
    # runner's `driver run K-1 exited` or `driver run K starting` line are the previous run's (its failure may
    # be printed to two files, read at different moments), so they are not read for this attempt; a file
    # leaves the set at that line.
    held: set[str] = field(default_factory=set)

    @property
    def key(self) -> tuple[str, int]:
        return (self.run_id, self.n)

    def log_dirs(self) -> list[Path]:
        return layout.log_dirs(self.log_base, self.job_id)

    def output_file(self) -> Path:
        return self.output if self.output is not None else layout.output_file(self.log_base, self.job_id)

    def current_log_dir(self) -> Path | None:
        return layout.current_log_dir(self.log_base, self.job_id)


class Monitor:
    """Reads what every live attempt writes and hands what the rules make of it to `Actions`."""

    LOOP = "monitor"  # its name for the watchdog
    ALLOWANCE_S = 60.0  # how long it may stay silent before the watchdog calls it wedged

    def __init__(
        self,
        store: Store,
        settings: Settings,
        actions: Actions,
        heartbeats: HeartbeatRegistry,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.settings = settings
        self.actions = actions
        self.heartbeats = heartbeats
        self.clock = clock
        w = settings.watch
        self.changes = ChangeSource(force_polling=w.force_polling, cadence=cadence_of(w))
        self._over_budget_logged: float | None = None  # when the last over-budget warning went out
        self._progress_saved_at = 0.0
        self._load_noted_at = 0.0
        self.cursors = StoreCursors(self.store)
        self.follower = Follower(self.cursors)
        self.watches: dict[tuple[str, int], AttemptWatch] = {}
        self._rulesets: dict[tuple[tuple[str, ...], bool, tuple[str, ...]], RuleSet] = {}
        self._by_path: dict[str, tuple[str, int]] = {}
        # per file holding a job's driver output: the newest `driver run K starting` line and `driver run K
        # exited` line read in it, by whichever attempt's watch read it (the cursor is the file's, not the
        # attempt's)
        self._started: dict[str, int] = {}
        self._exited: dict[str, int] = {}
        # per attempt: log files read but whose cursors are not saved yet, and metrics/event file cursors
        # staged for saving; saved when that attempt's matches were dispatched, never another attempt's
        self._unsaved: dict[tuple[str, int], set[str]] = {}
        self._scalar_cursors: dict[tuple[str, int], dict[str, FileCursor]] = {}
        # per run: the phase samples its stalled triggers learnt (rules/rhythm.py), handed to its next attempt
        # so a resumed run is held to its own rhythm from its first warm step; saved with the progress
        # snapshot (RHYTHM_KEY), so a restarted daemon does not go back to the fixed bound
        self._learnt: dict[str, dict[str, Rhythm]] = {}
        self._reading = anyio.Lock()  # one attempt's files and matcher state at a time (a worker thread)
        self.on_log_bytes: Callable[[int], None] | None = None  # told how many log bytes each read took in
        self.on_poll_load: Callable[[PollLoad], None] | None = None  # told the polling load every 10 s

    # ---- which attempts are watched -----------------------------------------------------------------
    def ruleset_for(self, spec: JobSpec) -> RuleSet:
        key = (tuple(str(p) for p in spec.rules.files), spec.rules.use_default, tuple(spec.rules.disable))
        rs = self._rulesets.get(key)
        if rs is None:
            rs = spec_ruleset(spec)
            self._rulesets[key] = rs
        return rs

    def rules_files(self) -> set[Path]:
        """The runs' own rules files in force (their changes reload the rules, as the shipped ones do)."""
        return {Path(f) for files, _, _ in self._rulesets for f in files}

    def reload_rules(self) -> None:
        """Called on SIGHUP / a rules file change: compile everything anew first, swap only if all load."""
        load_ruleset()  # the shipped rules must load even when no run uses a custom set
        fresh = {}
        for key in self._rulesets:
            files, use_default, disable = key
            fresh[key] = load_ruleset(
                [Path(f) for f in files], use_default=use_default, disable=list(disable)
            )
        self._rulesets = fresh
        for w in self.watches.values():
            w.rules = self.ruleset_for(w.spec)

    def watch_for(self, run: RunRow, attempt: AttemptRow) -> AttemptWatch | None:
        key = (run.id, attempt.n)
        w = self.watches.get(key)
        if w is not None:
            w.started_at = attempt.started_at  # from the row read with each state and tick
            return w
        if not attempt.job_id:
            return None
        spec = run.spec
        try:
            rules = self.ruleset_for(spec)
        except Exception as exc:
            log.error("the run's rules do not load; using the default rules", run_id=run.id, error=str(exc))
            rules = load_ruleset()
        st = MatcherState(run_id=run.id, attempt=attempt.n)
        st.rhythms = {k: r.learnt() for k, r in self._learnt_by(run.id).items()}
        log_base, output = attempt_log_base(spec, self.settings.runs_dir / run.id, attempt.overrides)
        w = AttemptWatch(
            run.id,
            attempt.n,
            attempt.job_id,
            spec,
            rules,
            st,
            log_base,
            contract=file_contract(spec),
            output=output,
        )
        if spec.trainer_log_dir is not None:
            w.status = StatusReader(spec.trainer_log_dir / STATUS_FILE)
        w.marks = self._mark_tracker(run, attempt)
        w.started_at = attempt.started_at
        if attempt.overrides.get("runner"):  # its job waits for a word whatever the spec says now
            w.driver_run = int(attempt.overrides.get("driver_run") or 1)
            w.runner_key = runner.attempt_key(run.id, attempt.n, attempt.overrides)
        w.driver_exited_at = self._recover_driver_exit(w)
        # One verdict for all of a run's log paths: polled when any of them is on a shared filesystem (an
        # adopted job's output file may live elsewhere than its log folders).
        verdicts = {self.changes.classify(w.log_base), self.changes.classify(w.output_file())}
        w.mode = "poll" if "poll" in verdicts else "inotify"
        self.watches[key] = w
        if attempt.slurm_state == JobState.PENDING.value:
            self.changes.pause(key)  # a pending job writes nothing: its polled paths cost nothing
        self._refresh_files(w)
        if w.driver_run is not None and w.driver_run >= 2:
            # The files there are now, or that the previous watch had (a requeue's folder made later is the
            # requeued start's, which counts driver runs from 1: see answer_runner).
            k = w.driver_run
            prev = [o for o in self.watches.values() if o.run_id == run.id and o.job_id == attempt.job_id]
            if any(o.n < attempt.n for o in prev):
                w.held = {
                    f
                    for f in w.files.union(*(o.files for o in prev if o.n < attempt.n))
                    if self._started.get(f, 0) < k and self._exited.get(f, 0) < k - 1
                }
        return w

    def _mark_tracker(self, run: RunRow, attempt: AttemptRow) -> MarkTracker:
        """What the attempt's timeline already holds (after a restart), so nothing is marked twice."""
        tracker = MarkTracker(resume_step(attempt.overrides, run.spec), attempt.intent_at)
        own = [m for m in self.store.marks(run.id) if m.attempt == attempt.n]
        tracker.training = any(m.kind == "training" for m in own)
        tracker.ray_up = any(m.kind == "ray_up" for m in own)
        return tracker

    def record_marks(self, w: AttemptWatch, ops: list[MarkOp]) -> None:
        """Write the attempt's new timeline marks (microsecond SQLite calls).

        An ended attempt's files are drained for a while, but the trainer's status, metrics and event files
        are shared with the next attempt: a step or mark dated after this attempt ended is the next one's.
        """
        for op in ops:
            if isinstance(op, (Step, Mark)) and w.ended_at is not None and op.at > w.ended_at:
                continue
            if isinstance(op, Step):
                self.store.record_step(w.run_id, w.n, op.step, op.at, op.reward)
            elif isinstance(op, Mark):
                mark_id = self.store.open_mark(w.run_id, w.n, op.kind, op.at, step=op.step)
                if op.lasting:
                    w.open_marks[op.kind] = mark_id
            elif isinstance(op, End):
                open_id = w.open_marks.pop(op.kind, None)
                if open_id is not None:
                    self.store.close_mark(open_id, op.at)

    def _recover_driver_exit(self, w: AttemptWatch) -> float | None:
        """After a restart the tailer resumes past the 'driver exited' line: look for it in the tail."""
        path = w.output_file()
        try:
            with path.open("rb") as fh:
                st = os.fstat(fh.fileno())
                fh.seek(max(0, st.st_size - 65536))
                tail = fh.read().decode("utf-8", "replace")
        except OSError:
            return None
        return layout.driver_exit_time(tail, st.st_mtime)

    def _log_dirs(self, w: AttemptWatch) -> list[Path]:
        """The attempt's log folders: from the poller's last listing of its log base when polled (no
        metadata operation of our own: the plan pays for and paces listings), else listed now."""
        if w.mode == "poll":
            return [
                w.log_base / n for n in layout.log_dir_names(self.changes.listing(w.log_base) or (), w.job_id)
            ]
        return w.log_dirs()

    def _entries(self, w: AttemptWatch, d: Path) -> list[str]:
        """A folder's entry names, the same way as `_log_dirs`; [] when it is missing or not listed yet."""
        if w.mode == "poll":
            return sorted(self.changes.listing(d) or ())
        try:
            return sorted(p.name for p in d.iterdir())
        except OSError:
            return []

    def _watch(self, w: AttemptWatch, path: Path | str, *, is_dir: bool = False) -> None:
        self.changes.add(path, is_dir=is_dir, mode=w.mode, group=w.key)
        self._by_path[str(path)] = w.key

    def _watch_trainer(self, w: AttemptWatch) -> None:
        """Polled: the trainer's status.json, its newest exp dir's metrics.jsonl and TensorBoard event files
        go into the polling plan on the progress cadence, and their folders as listings, so that
        `read_trainer` runs when one of them changed instead of opening them all every second."""
        log_dir = w.spec.trainer_log_dir
        if log_dir is None:
            return
        wanted: list[tuple[Path, bool]] = [(log_dir, True), (log_dir / STATUS_FILE, False)]
        exps = [n for n in self.changes.listing(log_dir) or () if EXP_DIR_RE.match(n)]
        if exps:
            exp = log_dir / max(exps, key=lambda n: int(n.split("_", 1)[1]))
            tb = exp / TENSORBOARD_DIR
            wanted += [(exp, True), (exp / METRICS_FILE, False), (tb, True)]
            wanted += [(tb / n, False) for n in self.changes.listing(tb) or () if n.startswith("events.out")]
        for path, is_dir in wanted:
            if str(path) not in w.trainer_paths:
                self.changes.add(path, is_dir=is_dir, mode="poll", group=w.key, progress=not is_dir)
                self._by_path.setdefault(str(path), w.key)
                w.trainer_paths.add(str(path))

    def _refresh_files(self, w: AttemptWatch) -> None:
        w.refreshed_at = self.clock()
        wanted = {str(w.output_file())}
        dirs = self._log_dirs(w)
        entries: list[str] = []
        for d in dirs:
            names = self._entries(w, d)
            entries += names
            wanted |= {str(d / n) for n in layout.log_file_names(names)}
            if str(d) not in self._by_path:
                self._watch(w, d, is_dir=True)
        if str(w.log_base) not in self._by_path and (w.mode == "poll" or (not dirs and w.log_base.exists())):
            self._watch(w, w.log_base, is_dir=True)  # to see `<jobid>-logs/` (and restart folders) appear
        if w.mode == "poll":
            self._watch_trainer(w)
        else:
            w.tb_rescan = True
        for f in wanted - w.files:
            self._watch(w, f)
            # What was written before the watch began (while the daemon was down or starting) raises no
            # change event: read it on the next tick, from the saved cursor.
            w.unread.add(f)
        w.files |= wanted
        present = entries
        note_files(w.state, present)
        if not w.marks.ray_up and layout.HEAD_STARTED in present:
            self.record_marks(w, w.marks.ray_started(self._head_started_at(w)))

    def _head_started_at(self, w: AttemptWatch) -> float:
        """When the launcher wrote STARTED_RAY_HEAD (its mtime), else now."""
        now = self.clock()
        for d in self._log_dirs(w):
            try:
                return min(now, (d / layout.HEAD_STARTED).stat().st_mtime)
            except OSError:
                continue
        return now

    def _drop(self, w: AttemptWatch) -> None:
        for f in (
            list(w.files) + [str(d) for d in self._log_dirs(w)] + [str(w.log_base)] + list(w.trainer_paths)
        ):
            if self._by_path.get(f) == w.key:
                self.changes.remove(f)
                self._by_path.pop(f, None)
                self.follower.forget(f)
        self.watches.pop(w.key, None)
        if not any(o.run_id == w.run_id for o in self.watches.values()):
            self._forget_runner_lines(w)
        self.changes.forget_group(w.key)
        # The run's next attempt may share paths this one watched for both (the log base, the trainer's
        # files): watch them again for it, or they would go unwatched from here on.
        for other in self.watches.values():
            if other.run_id == w.run_id:
                other.trainer_paths -= {p for p in w.trainer_paths if p not in self._by_path}
                other.trainer_due = True
                self._refresh_files(other)
        if w.state.rhythms:
            self._learnt[w.run_id] = w.state.rhythms

    def _forget_runner_lines(self, w: AttemptWatch) -> None:
        for f in w.files:
            self._started.pop(f, None)
            self._exited.pop(f, None)

    def sync(self) -> list[AttemptWatch]:
        """Watch every open attempt; returns the ended ones whose files are due for their final drain."""
        now = self.clock()
        open_keys = set()
        for a in self.store.open_attempts():
            if a.state != AttemptState.SUBMITTED:
                continue
            run = self.store.get_run(a.run_id)
            if run is None:
                continue
            open_keys.add((a.run_id, a.n))
            known = (a.run_id, a.n) in self.watches
            w = self.watch_for(run, a)
            # New log files usually announce themselves as change events; the periodic re-listing is a
            # safety net, kept rare because on Lustre/GPFS every listing is metadata-server load.
            if w is not None and known and now - w.refreshed_at >= REFRESH_EVERY_S:
                self._refresh_files(w)
        due = []
        for key, w in list(self.watches.items()):
            if key not in open_keys:
                if w.ended_at is None:
                    w.ended_at = now
                if w.driver_run is not None and any(self._started.get(f, 0) > w.driver_run for f in w.files):
                    # The next attempt's watch read the runner's line for the next driver run: what is left
                    # in the files is that run's, and this one's final drain would take it away.
                    w.superseded = True
                if w.superseded or now - w.ended_at > DRAIN_AFTER_END_S:
                    due.append(w)
        return due

    async def drain(self, w: AttemptWatch) -> None:
        """The last read of an ended attempt's files (an unfinished last line too), then stop watching; one
        whose driver run the runner followed with the next reads nothing more (the rest is the next's)."""
        if not w.superseded:
            async with self._reading:
                await self._read_off_loop(w, flush=True)
        self.persist_cursors(w)
        self._drop(w)

    async def _read_off_loop(
        self, w: AttemptWatch, paths: set[str] | None = None, *, flush: bool = False
    ) -> list[Match]:
        """`read_files` in a worker thread (the caller holds `_reading`): a huge backlog, a slow line or a
        slow rule regex delays this attempt's matches, never the event loop. Cursors come from the store
        here, on the loop, first."""
        for path in paths if paths is not None else w.files:
            self.follower.cursor(path)
        return await anyio.to_thread.run_sync(lambda: self.read_files(w, paths, flush=flush))

    # ---- reading ------------------------------------------------------------------------------------
    def read_files(
        self, w: AttemptWatch, paths: set[str] | None = None, *, flush: bool = False
    ) -> list[Match]:
        """New lines of the attempt's files; `flush` also takes an unfinished last line (the job ended)."""
        matches: list[Match] = []
        for path in sorted(paths if paths is not None else w.files):
            while True:
                before = self.follower.cursor(path)
                try:
                    result = self.follower.poll(path, flush=flush)
                except OSError as exc:
                    log.warning("could not read log file", path=path, error=str(exc))
                    break
                if self.on_log_bytes is not None and result.cursor is not None:
                    start = before.offset if before is not None and before.inode == result.cursor.inode else 0
                    self.on_log_bytes(max(0, result.cursor.offset - start))
                matches += self._scan(w, result)
                # Saved only after dispatch() recorded what these lines decided: a crash in between
                # re-reads them, and the store's unique decision index keeps that from acting twice.
                self.follower.commit(result, persist=False)
                self._unsaved.setdefault(w.key, set()).add(path)
                if not result.more:
                    break
        return matches

    def _scan(self, w: AttemptWatch, result: TailResult) -> list[Match]:
        now = self.clock()
        name = Path(result.path).name
        is_output = Path(result.path) == w.output_file()
        out: list[Match] = []
        carries = w.driver_run is not None and layout.carries_driver_output(w.contract, name, is_output)
        for batch in result.batches:
            own = batch.texts
            if carries and w.driver_run is not None:
                if result.path in w.held:
                    own, passed = runner.own_lines(own, w.driver_run)
                    if passed:
                        w.held.discard(result.path)
                for t in batch.texts:
                    if (k := runner.run_starting(t)) is not None:
                        self._started[result.path] = max(k, self._started.get(result.path, 0))
                        if k > w.driver_run and name == layout.DRIVER_LOG:
                            w.superseded = True  # the lines from here on are the next driver run's
                    elif (k := runner.run_exited(t)) is not None:
                        self._exited[result.path] = max(k, self._exited.get(result.path, 0))
            if not own:
                continue
            texts = [layout.rule_text(w.contract, is_output, t) for t in own]
            out += scan_lines(w.rules, w.state, texts, name, batch.first_line, now, prefixes=batch.prefixes)
            if name == layout.DRIVER_LOG:
                out += self._driver_log(w, own, now)
            for text in own:
                if "wandb" in text and (url := wandb_run_url(text)):
                    w.wandb_url = url
                if layout.DRIVER_EXITED in text and layout.DRIVER_EXITED_RE.search(text):
                    w.driver_exited_at = w.driver_exited_at or now
                if "%|" in text or "it/s]" in text or "s/it]" in text:
                    bar = parse_tqdm(text)
                    if bar is not None:
                        ev = bar_event(w.run_id, w.n, bar, now)
                        out += feed(w.rules, w.state, ev)
                        if ev.key == "rollouts":
                            self.record_marks(w, w.marks.began_training(now))
                        w.progress[f"bar:{bar.desc}"] = {
                            "n": bar.n,
                            "total": bar.total,
                            "rate": bar.rate,
                            "at": now,
                        }
        return out

    def _driver_log(self, w: AttemptWatch, texts: list[str], now: float) -> list[Match]:
        """NeMo RL's banners are progress; its printed results are the metrics when nothing else has them."""
        out: list[Match] = []
        scalars: list[MetricEvent] = []
        for text in texts:
            for item in w.driver_log.feed(text):
                if isinstance(item, StepStarted):
                    ev = ProgressEvent(w.run_id, w.n, "step", item.step, item.total, at=now)
                    out += feed(w.rules, w.state, ev)
                    w.progress["step"] = {"n": item.step, "total": item.total, "at": now}
                elif isinstance(item, CheckpointSaving):
                    out += feed(
                        w.rules, w.state, ProgressEvent(w.run_id, w.n, "checkpoint", item.step, at=now)
                    )
                elif isinstance(item, ValidationStarted):
                    out += feed(
                        w.rules, w.state, ProgressEvent(w.run_id, w.n, "validation", item.step, at=now)
                    )
                elif isinstance(item, Scalar):
                    if w.source is None and metric_source(w.spec.trainer_log_dir) == "driver-log":
                        w.source = "driver-log"
                    if w.source == "driver-log":
                        scalars.append(MetricEvent(w.run_id, w.n, item.name, item.step, item.value, now))
        for mev in scalars:
            out += feed(w.rules, w.state, mev)
        self._mark_metric_steps(w, scalars, now)
        self._note_metrics(w, scalars)
        return out

    @staticmethod
    def _note_metrics(w: AttemptWatch, events: list[MetricEvent]) -> None:
        """Validation is logged only every few steps: the snapshot keeps the newest value of each metric, and
        the step it was logged at (`metric_steps`: a validation value is older than the newest reward)."""
        if not events:
            return
        merged = dict(w.progress.get("metrics") or {})  # type: ignore[call-overload]
        steps = dict(w.progress.get("metric_steps") or {})  # type: ignore[call-overload]
        for mev in events:
            merged[mev.tag] = mev.value
            merged["step"] = mev.step
            steps[mev.tag] = mev.step
        w.progress["metrics"] = merged
        w.progress["metric_steps"] = steps

    def read_bars(self, w: AttemptWatch) -> list[Match]:
        """A running tqdm bar redraws with `\r` and never ends its line: read it from the unfinished line."""
        now = self.clock()
        out: list[Match] = []
        for path in w.files:
            text = self.follower.tailer.partial_text(path)
            if not text or "|" not in text:
                continue
            bar = parse_tqdm(text.rsplit(SEGMENT_SEP, 1)[-1])
            if bar is not None:
                ev = bar_event(w.run_id, w.n, bar, now)
                out += feed(w.rules, w.state, ev)
                if ev.key == "rollouts":
                    self.record_marks(w, w.marks.began_training(now))
                w.progress[f"bar:{bar.desc}"] = {"n": bar.n, "total": bar.total, "rate": bar.rate, "at": now}
        return out

    def read_metrics(self, w: AttemptWatch, log_dir: Path, now: float) -> list[MetricEvent]:
        """New scalars from the source the trainer writes (watch/sources.py chooses it, once per attempt).

        metrics.jsonl and TensorBoard are read here; a driver log's printed results arrive with its lines
        (`_scan`). Event file cursors are staged here and saved by `persist_cursors`, i.e. after the matches
        of these scalars were dispatched.
        """
        if w.source is None:
            found = metric_source(log_dir)
            if found != "driver-log":
                w.source = found
        if w.source == "metrics.jsonl" and w.metrics is None:
            exp = newest_exp_dir(log_dir)
            if exp is not None:
                jsonl = exp / METRICS_FILE
                saved = self.store.load_cursor(str(jsonl))
                w.metrics_saved = FileCursor(*saved) if saved else None
                w.metrics = MetricsReader(jsonl, w.metrics_saved)
        if w.metrics is not None:
            got = w.metrics.read()
            if got.cursor is not None and w.metrics_saved != got.cursor:
                staged = self._scalar_cursors.setdefault(w.key, {})
                w.metrics_saved = staged[str(w.metrics.path)] = got.cursor
            return to_metric_events(w.run_id, w.n, got.rows, now)
        if w.source != "tensorboard":
            return []
        if w.tb is None:
            w.tb = TensorBoardWatcher(log_dir, load=lambda path: self._load_tb_cursor(w, path))
        # Listing the exp dirs is metadata-server load on Lustre/GPFS: done with the log files' re-listing;
        # the known files are read on every call.
        # An ended attempt only drains the files it knows: a newer exp_NNN/ is the next attempt's (the
        # cursors are per file, so reading it here would take its scalars away from that attempt).
        scalars = w.tb.read(rescan=w.tb_rescan and w.ended_at is None)
        w.tb_rescan = False
        for path, cursor in w.tb.cursors().items():
            if w.tb_saved.get(path) != cursor:
                w.tb_saved[path] = cursor
                self._scalar_cursors.setdefault(w.key, {})[path] = FileCursor(cursor[0], cursor[1], 0)
        return tb_metric_events(w.run_id, w.n, scalars)

    def _load_tb_cursor(self, w: AttemptWatch, path: str) -> tuple[int, int] | None:
        row = self.store.load_cursor(path)
        if row is None:
            return None
        w.tb_saved[path] = (row[0], row[1])
        return w.tb_saved[path]

    def read_trainer(self, w: AttemptWatch) -> list[Match]:
        now = self.clock()
        out: list[Match] = self.read_bars(w) + self.read_status(w, now)
        if w.spec.trainer_log_dir is not None and w.started_at is not None:
            # The metrics file and event files are shared by a run's attempts. Rows dated before this
            # attempt's job started are the last attempt's, written as it died: a NaN step the rollback
            # already answered (Slurm calls a cancelled job COMPLETING at once and the resume may be
            # submitted then, while the old trainer still saves). They are not this attempt's to be judged
            # by, and until its job started none are: the files are not read before (their cursors wait).
            # (A row without its own time is stamped `now`, as in _mark_metric_steps: it is kept.)
            floor = max(w.marks.not_before, w.started_at)
            read = self.read_metrics(w, w.spec.trainer_log_dir, now)
            events = [e for e in read if e.at == now or e.at >= floor]
            for mev in events:
                out += feed(w.rules, w.state, mev)
            self._mark_metric_steps(w, events, now)
            self._note_metrics(w, events)
        return out

    def read_status(self, w: AttemptWatch, now: float) -> list[Match]:
        """The trainer's status.json, if it changed: its phase and step, as progress for the rules."""
        out: list[Match] = []
        if w.status is not None:
            for pev in w.status.poll_events(w.run_id, w.n, now):
                out += feed(w.rules, w.state, pev)
                if pev.key == "status":
                    w.progress["status"] = dict(pev.detail)
                    self.record_marks(w, w.marks.status(pev.detail, now))
        return out

    def _mark_metric_steps(self, w: AttemptWatch, events: list[MetricEvent], now: float) -> None:
        """Each new metrics row is a step reached (with its reward), at the row's own time when it has one."""
        by_step: dict[int, tuple[float, float | None]] = {}
        for mev in events:
            at, reward = by_step.get(mev.step, (mev.at, None))
            if mev.tag == TRAIN_REWARD:  # the readers give Shepherd's names
                reward = mev.value
            by_step[mev.step] = (min(at, mev.at), reward)
        for step, (at, reward) in sorted(by_step.items()):
            # A row without its own time was stamped with `now` (to_metric_events): then it proves nothing.
            self.record_marks(w, w.marks.metrics(step, reward, at, timed=at != now))

    def check_ended(self, w: AttemptWatch, now: float, after_s: float | None = None) -> list[Match]:
        """What the launcher's ENDED marker says, per its file contract, as one line for the rules.

        NeMo RL's ray.sub writes ENDED only when the Ray bring-up failed: `ray-startup-failed`. Ours writes
        it when the driver exits: a RUNNING job whose driver exited long ago without it is NeMo RL #1019
        (`ended-not-written`). `after_s` defaults to the `watch.ended_overdue_s` setting (10 min: the
        launcher's cleanup takes seconds), read on each call so that a settings reload applies too.
        """
        if w.ended_alarm:
            return []
        dirs = self._log_dirs(w)
        newest = layout.newest_log_dir((d.name for d in dirs), w.job_id)
        current = w.log_base / newest if newest else None
        present = self._entries(w, current) if current is not None else []
        if w.contract.ended == "bring-up-failed":
            if layout.ENDED not in present:
                return []
            w.ended_alarm = True
            line = (
                f"shepherd: {w.contract.name}'s launcher wrote ENDED in {current}: the Ray bring-up failed "
                f"(job {w.job_id}; the head or a worker step did not start)"
            )
            return scan_lines(w.rules, w.state, [line], ENDED_STALL_SOURCE, 1, now)
        if after_s is None:
            after_s = self.settings.watch.ended_overdue_s
        if w.state.job_state is None or w.state.job_state.value != "RUNNING":
            return []
        if not layout.ended_overdue(present, w.driver_exited_at, now, after_s):
            return []
        w.ended_alarm = True
        mins = (now - (w.driver_exited_at or now)) / 60
        line = (
            f"shepherd: ENDED not written {mins:.0f} min after the driver exited while job {w.job_id} "
            f"is RUNNING in {current}: a node's srun likely failed and the job idles until its time limit"
        )
        return scan_lines(w.rules, w.state, [line], ENDED_STALL_SOURCE, 1, now)

    async def answer_runner(self, w: AttemptWatch, now: float) -> None:
        """The runner waits for a word after each driver exit: when no decision resumed the attempt in place
        (Actions) the job is told to end, at once after a clean exit, else once the rules had RUNNER_SETTLE_S
        to read the driver's last lines and no rule claimed the failure, unless the policy resumes it as an
        unrecognised failure (Actions.on_driver_failed: in place, since the job still runs); the job's end
        is then handled as any other."""
        if w.driver_run is None or w.ended_at is not None:
            return
        d = inplace.job_runner_dir(w.log_base, w.runner_key)  # looked up again: a requeue makes a new one
        if d is None:
            return
        if d != w.runner_dir:
            # A Slurm requeue started the job again: its runner counts driver runs from 1 in a folder of its
            # own and waits for a word there, whatever the job's earlier start was told.
            if w.runner_dir is not None:
                w.answered, w.driver_exit_seen = False, None
                # Its driver runs count from 1 again in the files the starts share: what was read of the
                # earlier start's runner lines says nothing about this one's.
                w.held.clear()
                self._forget_runner_lines(w)
            w.runner_dir, w.driver_run = d, inplace.driver_run_in(d, w.driver_run)
        if w.answered:
            return
        report = inplace.read_exit(d, w.driver_run)
        if report is None:
            return
        if w.driver_exit_seen is None:
            w.driver_exit_seen = now
        if self.actions.decided(w.run_id, w.n):
            if not self.actions.carried_out(w.run_id, w.n):
                return  # a restart in place gives its own word when it is carried out
            # A restart in place has given its word (the `end` below is refused); one through Slurm has
            # cancelled the job, or lets it finish (a save deadline, a time limit's hop): that job must not
            # wait out the runner's bound for a word nobody will give.
            w.answered = True
            try:
                inplace.give_end(d, w.driver_run, attempt=w.n)
            except OSError as exc:
                log.warning("could not tell the job's runner to end the job", run_id=w.run_id, error=str(exc))
            return
        if report.code != 0 and now - w.driver_exit_seen < RUNNER_SETTLE_S:
            return
        # A runner that is ending the job by itself (a scancel or a time limit signalled it) wrote `ended`:
        # that end is Slurm's to say (CANCELLED is never resumed), not a failure to resume here.
        if report.code != 0 and not (d / runner.ENDED_NAME).exists() and await self._resumed(w, report.code):
            return  # decided: the next tick finds it carried out (a restart in place gives its own word)
        w.answered = True
        try:
            given = inplace.give_end(d, w.driver_run, attempt=w.n)
        except OSError as exc:
            log.warning("could not tell the job's runner to end the job", run_id=w.run_id, error=str(exc))
            return
        if given:
            self.store.add_event(
                w.run_id,
                w.n,
                "runner-ended",
                f"driver run {w.driver_run} of Slurm job {w.job_id} exited with code {report.code}:"
                " the job ends (no restart in place)",
            )

    async def _resumed(self, w: AttemptWatch, code: int) -> bool:
        """Whether the policy resumed the attempt whose driver run failed unclaimed (Actions decides)."""
        run, attempt = self.store.get_run(w.run_id), self.store.get_attempt(w.run_id, w.n)
        if run is None or attempt is None:
            return False
        try:
            return await self.actions.on_driver_failed(run, attempt, code)
        except Exception:
            log.exception(
                "deciding on a failed driver run failed: the job ends", run_id=w.run_id, attempt=w.n
            )
            return False

    def persist_progress(self, w: AttemptWatch) -> None:
        """The progress snapshot `status` and `watch` show, with what the run's rhythm taught so far."""
        learnt = {k: r.learnt().to_dict() for k, r in w.state.rhythms.items() if r.samples}
        if w.progress or learnt:
            data = {**w.progress, RHYTHM_KEY: learnt} if learnt else w.progress
            self.store.save_progress(w.run_id, w.n, json.dumps(data, default=str))

    def _learnt_by(self, run_id: str) -> dict[str, Rhythm]:
        """What the run's earlier attempts taught: this daemon's, else what was saved before a restart."""
        if run_id not in self._learnt:
            snap = self.store.load_progress(run_id)
            self._learnt[run_id] = MatcherState.rhythms_from(snap[2].get(RHYTHM_KEY)) if snap else {}
        return self._learnt[run_id]

    # ---- acting -------------------------------------------------------------------------------------
    def persist_cursors(self, w: AttemptWatch | None = None) -> None:
        """Save the cursors of what was read for `w` (None: every attempt) once its matches are dispatched."""
        keys = [w.key] if w is not None else list(self._unsaved.keys() | self._scalar_cursors.keys())
        with self.cursors.batch():  # one transaction, or part of the round's
            for key in keys:
                for path in self._unsaved.pop(key, set()):
                    self.follower.persist(path)
                self.cursors.save_many(self._scalar_cursors.pop(key, {}))

    async def dispatch(self, w: AttemptWatch, matches: list[Match]) -> None:
        try:
            self._note_wandb(w)
            await self._dispatch(w, matches)
        finally:
            self.persist_cursors(w)

    def _note_wandb(self, w: AttemptWatch) -> None:
        """A W&B run page the logs named: recorded with the run (a `wandb` event) and announced once, when it
        is not the one already recorded (a resumed attempt that continues the same W&B run)."""
        url = w.wandb_url
        if url is None or url == w.wandb_noted:
            return
        w.wandb_noted = url
        try:
            if self.store.wandb_url(w.run_id) == url:
                return
            self.store.add_event(w.run_id, w.n, "wandb", f"W&B run: {url}", {"url": url})
            self.actions.notify(Notice(w.run_id, "wandb", f"W&B run: {url}", fields={"url": url}))
        except Exception:
            log.exception("could not record the W&B run page", run_id=w.run_id)

    async def _dispatch(self, w: AttemptWatch, matches: list[Match]) -> None:
        if not matches:
            return
        run = self.store.get_run(w.run_id)
        attempt = self.store.get_attempt(w.run_id, w.n)
        if run is None or attempt is None:
            return
        for m in matches:
            try:
                await self.actions.on_match(run, attempt, m)
            except Exception:
                log.exception("acting on a match failed", run_id=w.run_id, rule=m.rule)

    async def on_state(self, run: RunRow, attempt: AttemptRow, ev: StateEvent) -> None:
        """A Slurm state change: drain the attempt's logs first (the cause is usually there), then decide."""
        w = self.watch_for(run, attempt)
        if w is None:
            if ev.state.is_terminal:
                await self.actions.on_unmatched_end(run, attempt, ev.state, ev.exit_code, ev.signal)
            return
        if ev.state == JobState.PENDING:
            self.changes.pause(w.key)
        else:
            self.changes.resume(
                w.key
            )  # started (or ended: its last lines are drained from the base interval)
        async with self._reading:
            self._refresh_files(w)
            matches = await self._read_off_loop(w, flush=ev.state.is_terminal)
            matches += self.read_trainer(w)
            matches += self.check_ended(w, self.clock())
        await self.dispatch(w, matches)
        async with self._reading:
            matches = feed(w.rules, w.state, ev)
        await self.dispatch(w, matches)
        if ev.state.is_terminal:
            w.ended_at = w.ended_at or self.clock()
            # Settles the run unless a decision already did (resume scheduled, gave up, completed): an
            # alert-only match (a pending warning, say) must not leave an ended run RUNNING.
            await self.actions.on_unmatched_end(run, attempt, ev.state, ev.exit_code, ev.signal)

    # ---- loops --------------------------------------------------------------------------------------
    async def run(self) -> None:
        async with anyio.create_task_group() as tg:
            await tg.start(self.changes.run)
            tg.start_soon(self._change_loop)
            tg.start_soon(self._tick_loop)

    async def _change_loop(self) -> None:
        async for paths in self.changes:
            with self.cursors.batch():  # the cursors of every run in this round: one SQLite transaction
                await self.on_changes(paths)

    async def on_changes(self, paths: set[str]) -> None:
        """Changed paths from the watcher: read the log files among them, note trainer files as due."""
        self.heartbeats.beat_if_registered(self.LOOP)
        by_watch: dict[tuple[str, int], set[str]] = {}
        for p in paths:
            key = self._by_path.get(p)
            if key is None:
                parent = self._by_path.get(str(Path(p).parent))
                if parent is None:
                    continue
                key = parent
            by_watch.setdefault(key, set()).add(p)
        for key, changed in by_watch.items():
            w = self.watches.get(key)
            if w is None or w.superseded:
                continue
            async with self._reading:
                trainer = {
                    p for p in changed if p in w.trainer_paths or os.path.dirname(p) in w.trainer_paths
                }
                status = str(w.status.path) if w.status is not None else None
                if trainer - {status}:  # status.json alone is read below, now: nothing else to re-open
                    w.trainer_due = True
                if trainer:
                    # a new exp dir or event file: list the event files again on the next read
                    w.tb_rescan = w.tb_rescan or any(p not in w.trainer_paths for p in trainer)
                    self._watch_trainer(w)  # from the listings: no I/O
                if any(p not in w.files and p not in w.trainer_paths for p in changed):
                    self._refresh_files(w)
                matches = await self._read_off_loop(w, {p for p in changed if p in w.files})
                if status in trainer:
                    # Each phase the trainer writes is seen when it is written, not only at the next tick: a
                    # phase shorter than a tick would otherwise never be learnt (rules/rhythm.py).
                    matches += self.read_status(w, self.clock())
            await self.dispatch(w, matches)
            self.heartbeats.beat_if_registered(self.LOOP)

    def note_load(self, now: float) -> PollLoad:
        """Say when the polling budget cannot cover the base interval (a warning, repeated every
        OVER_BUDGET_REPEAT_S while it lasts) and leave the numbers for `shepherd status`."""
        load = self.changes.load()
        fields = {
            "budget_ops_per_s": round(load.budget_ops_per_s, 1),
            "demand_ops_per_s": round(load.demand_ops_per_s, 1),
            "files": load.files,
            "active_files": load.active_files,
            "progress_files": load.progress_files,
            "listings": load.listings,
            "paused": load.paused,
            "lag_s": round(load.lag_s, 2),
        }
        if not load.covered:
            if self._over_budget_logged is None or now - self._over_budget_logged >= OVER_BUDGET_REPEAT_S:
                log.warning(
                    "polling budget cannot cover the base interval: files are looked at late "
                    "(raise watch.poll_budget_ops_per_s, or accept the lag)",
                    **fields,
                )
                self._over_budget_logged = now
        elif self._over_budget_logged is not None:
            log.info("polling back within its budget", **fields)
            self._over_budget_logged = None
        if self.on_poll_load is not None:
            self.on_poll_load(load)
        path = self.settings.watch_load_path
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps({"at": now, "covered": load.covered, **fields}))
            os.replace(tmp, path)
        except OSError as exc:
            log.warning("could not write the polling load", path=str(path), error=str(exc))
        return load

    async def _tick_loop(self) -> None:
        while True:
            self.heartbeats.beat_if_registered(self.LOOP)
            try:
                with self.cursors.batch():  # every attempt's cursors of this tick: one SQLite transaction
                    await self.tick()
            except Exception:
                log.exception("monitor tick failed")
            await anyio.sleep(1.0)

    async def tick(self) -> None:
        """Once a second: watch new attempts, drain ended ones, read what is due, feed the clock."""
        for ended in self.sync():
            await self.drain(ended)
        now = self.clock()
        for w in list(self.watches.values()):
            if w.superseded:
                continue  # dropped at the next sync; its files' new lines are the next attempt's
            async with self._reading:
                unread, w.unread = w.unread, set()
                matches = await self._read_off_loop(w, unread) if unread else []
                if w.mode == "poll" and not w.trainer_due:
                    matches += self.read_bars(w)  # from memory; the trainer's files did not change
                else:
                    w.trainer_due = False
                    matches += self.read_trainer(w)
                matches += feed(w.rules, w.state, Tick(now))
                matches += self.check_ended(w, now)
            await self.dispatch(w, matches)
            await self.answer_runner(w, now)
            self.heartbeats.beat_if_registered(self.LOOP)
        if now - self._progress_saved_at >= 5:
            for w in self.watches.values():
                self.persist_progress(w)
            self._progress_saved_at = now
        if now - self._load_noted_at >= LOAD_EVERY_S:
            self.note_load(now)
            self._load_noted_at = now
