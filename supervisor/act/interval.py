"""A run's checkpoint interval as measured (its saves timed from the checkpoint files, its steps and failures
from the store) beside Young/Daly's, and the save period a tuned next attempt gets: the I/O around the pure
arithmetic of decide/interval.py."""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import structlog

from supervisor.act.checkpoints import config_int
from supervisor.decide.interval import (
    MIN_FAILURES,
    Advice,
    Exposure,
    advise,
    save_duration,
    seconds_per_step,
)
from supervisor.decide.policy import FREE_CATEGORIES
from supervisor.domain.changes import override_key
from supervisor.domain.overrides import AttemptOverrides
from supervisor.domain.runs import RunRow
from supervisor.domain.spec import JobSpec
from supervisor.domain.trainer_files import INFO_FILE, STEP_DIR_RE
from supervisor.report.costs import Cost
from supervisor.report.read import run_report
from supervisor.store import Store

log = structlog.get_logger(__name__)

SAVE_PERIOD_KEY = "checkpointing.save_period"  # NeMo RL's key; our trainer reads the same
PERSON_SET_KEY = f"command+{SAVE_PERIOD_KEY}"  # how a person's `--set command+=...` is recorded (changes.py)
MAX_TIMED_SAVES = 20  # the newest steps timed per dir: enough for a median, a bounded number of stats
ALL_EVENTS = 1_000_000


@dataclass(frozen=True, slots=True)
class StoreSide:
    """What the store says about a run's interval (read on the daemon's loop: SQLite stays on its thread)."""

    step_marks: tuple[tuple[tuple[int, float], ...], ...]
    own: Exposure
    cluster: Exposure | None
    nodes: int
    previous_period: int | None  # what Shepherd passed to the run's latest attempt
    person_set: bool  # a person set the key with `--set command+=checkpointing.save_period=N`


@dataclass(frozen=True, slots=True)
class FileSide:
    """What the checkpoint dirs say: each timed save, the kept steps, the save period in their config."""

    saves: tuple[float, ...]
    kept_steps: tuple[int, ...]
    config_period: int | None


def failures(c: Cost) -> int:
    """Failures that count against the MTBF: time limits and preemptions are the chain working."""
    return sum(1 for f in c.failures if f.category not in FREE_CATEGORIES)


def cluster_exposure(store: Store, now: float) -> Exposure:
    """Every run in the store: its failures over its node-seconds of running."""
    n, seconds = 0, 0.0
    for run in store.list_runs():
        c = run_report(store, run, now).cost
        n += failures(c)
        seconds += c.running_s * max(1, run.spec.slurm.nodes)
    return Exposure(n, seconds)


def store_side(
    store: Store, run: RunRow, now: float, *, with_cluster: bool = True, cluster: Exposure | None = None
) -> StoreSide:
    """The run's steps, failures and last passed period; the cluster's rate only when the run has too few."""
    c = run_report(store, run, now).cost
    own = Exposure(failures(c), c.running_s)
    marks: dict[int, list[tuple[int, float]]] = {}
    for s in store.steps(run.id):
        marks.setdefault(s.attempt, []).append((s.step, s.at))
    attempts = store.attempts(run.id)
    previous = attempts[-1].overrides.get("save_period") if attempts else None
    person = any(  # every event: a person's setting must not fall out of a window of recent ones
        e.kind == "spec-changed" and e.data.get("key") == PERSON_SET_KEY
        for e in store.events(run.id, limit=ALL_EVENTS)
    )
    if not with_cluster or own.failures >= MIN_FAILURES:
        cluster = None
    elif cluster is None:
        cluster = cluster_exposure(store, now)
    return StoreSide(
        step_marks=tuple(tuple(m) for m in marks.values()),
        own=own,
        cluster=cluster,
        nodes=max(1, run.spec.slurm.nodes),
        previous_period=previous if isinstance(previous, int) and previous >= 1 else None,
        person_set=person,
    )


def timed_saves(step_dirs: Iterable[Path]) -> list[float]:
    """Each complete step's save, timed from its files (decide/interval.py's `save_duration`)."""
    out: list[float] = []
    for step_dir in step_dirs:
        try:
            dir_ctime = step_dir.stat().st_ctime
            with os.scandir(step_dir) as it:
                stats = [e.stat(follow_symlinks=False) for e in it]
        except OSError:
            continue  # deleted by retention meanwhile, or unreadable: not timed
        took = save_duration([(s.st_mtime, s.st_ctime) for s in stats], dir_ctime)
        if took is not None:
            out.append(took)
    return out


def complete_steps(directory: Path) -> list[tuple[int, Path]]:
    """(step, path) of every complete ``step_N`` (its training_info.json written), newest first."""
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    found = []
    for name in names:
        m = STEP_DIR_RE.match(name)
        if m and (directory / name / INFO_FILE).is_file():
            found.append((int(m.group(1)), directory / name))
    return sorted(found, reverse=True)


def config_save_period(step_dir: Path) -> int | None:
    """`checkpointing.save_period` from a checkpoint's own config.yaml (NeMo RL and our trainer write it)."""
    return config_int(step_dir, "checkpointing", "save_period")


def file_side(dirs: Sequence[Path], train_dir: Path) -> FileSide:
    """Saves timed in `dirs` (the spec's and the lineage's), the steps kept in `train_dir` (where the next
    attempt's retention runs), and the save period the newest checkpoint there was written with."""
    saves: list[float] = []
    for d in dict.fromkeys(dirs):
        saves += timed_saves(p for _, p in complete_steps(d)[:MAX_TIMED_SAVES])
    kept = complete_steps(train_dir)
    return FileSide(tuple(saves), tuple(s for s, _ in kept), config_save_period(kept[0][1]) if kept else None)


_COMMAND_PERIOD = re.compile(r"^(?:\+\+|\+)?" + re.escape(SAVE_PERIOD_KEY) + r"=(\d+)$")


def command_period(spec: JobSpec) -> int | None:
    """The save period the spec's command sets (`checkpointing.save_period=N`), if it sets one."""
    if isinstance(spec.command, str):
        try:
            words = shlex.split(spec.command)
        except ValueError:
            return None
    else:
        words = list(spec.command)
    for word in reversed(words):
        if override_key(word) == SAVE_PERIOD_KEY and (m := _COMMAND_PERIOD.match(word)):
            return int(m.group(1)) or None
    return None


def period_in_use(spec: JobSpec, st: StoreSide, fs: FileSide) -> int | None:
    """What the trainer saves every: what Shepherd passed last, else the command's, else the checkpoints'."""
    if st.previous_period is not None and not st.person_set:
        return st.previous_period
    return command_period(spec) or fs.config_period


def combine(spec: JobSpec, st: StoreSide, fs: FileSide) -> Advice:
    return advise(
        fs.saves,
        seconds_per_step(st.step_marks),
        st.own,
        st.cluster,
        nodes=st.nodes,
        period=period_in_use(spec, st, fs),
        kept_steps=fs.kept_steps,
    )


def dirs_of(spec: JobSpec, lineage: str | None) -> tuple[list[Path], Path]:
    """(dirs whose saves are timed, the dir the trainer trains in): the spec's and the lineage's."""
    assert spec.checkpoint is not None
    original = Path(spec.checkpoint.dir)
    train = Path(lineage) if lineage else original
    return [original, train], train


def measure(store: Store, run: RunRow, now: float, *, cluster: Exposure | None = None) -> Advice | None:
    """The run's interval advice as `status` and `report` show it; None: the spec names no checkpoint dir.
    `cluster`: every run's exposure, when the caller measures several runs (read once)."""
    spec = run.spec
    if spec.checkpoint is None:
        return None
    attempts = store.attempts(run.id)
    lineage = AttemptOverrides.from_dict(attempts[-1].overrides).checkpoint_dir if attempts else None
    dirs, train = dirs_of(spec, lineage)
    return combine(spec, store_side(store, run, now, cluster=cluster), file_side(dirs, train))


def next_save_period(spec: JobSpec, st: StoreSide, fs: FileSide) -> tuple[int | None, str]:
    """(the save period to pass the next attempt, why); None: pass none (the command's own stands).

    A person's `--set command+=checkpointing.save_period=N` wins from then on. Otherwise the period
    Shepherd passed last is kept whenever no new one can be computed (or tuning was switched off): going
    back to the command's period could orphan the steps saved under the tuned one.
    """
    if st.person_set:
        return None, "a person set checkpointing.save_period"
    tune = spec.checkpoint is not None and spec.checkpoint.tune_interval
    if not tune:
        if st.previous_period is not None:
            return st.previous_period, "kept from the last attempt (tuning is off)"
        return None, "tuning is off"
    advice = combine(spec, st, fs)
    if advice.next_period is None:
        why = "not measured yet" if advice.optimum_s is None else "the save period in use is not known"
        return st.previous_period, why
    return advice.next_period, advice.held or f"Young/Daly's {advice.optimum_s or 0:.0f} s"
