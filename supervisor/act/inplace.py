"""The daemon's side of a restart in place, at the edge: reading the runner's reports and writing Shepherd's
word to it (supervisor/slurm/launchers/runner.py says what the files hold, runner.sh how they are read).

A word is written once: created by a hard link from a finished temporary file, which fails when a word is
already there, so a `run again` and an `end` can never both reach the runner, nor a word be half-read."""

from __future__ import annotations

import os
from pathlib import Path

from supervisor.slurm.launchers import runner


class WordTaken(Exception):
    """The runner already has a word for this driver run (Shepherd's `end`, or an earlier `run`)."""


def _start_of(name: str, key: str) -> int | None:
    """Which start of the job `name` is the runner's folder of (runner.runner_dir), None when it is not one
    of `key`'s: `<key>-runner` is 0, `<key>-<i>-runner` is i (a key holds dashes: `<run id>-a<n>`)."""
    if name == f"{key}-runner":
        return 0
    if not (name.startswith(f"{key}-") and name.endswith("-runner")):
        return None
    start = name[len(key) + 1 : -len("-runner")]
    return int(start) if start.isascii() and start.isdigit() else None


def job_runner_dir(base: Path, key: str) -> Path | None:
    """The runner's folder of the job's newest start (runner.runner_dir), None before one exists."""
    best: tuple[int, Path] | None = None
    try:
        entries = list(base.iterdir())
    except OSError:
        return None
    for p in entries:
        start = _start_of(p.name, key)
        if start is not None and (best is None or start > best[0]):
            best = (start, p)
    return best[1] if best else None


def driver_run_in(d: Path, recorded: int) -> int:
    """Which driver run of the job the runner's folder `d` is at, `recorded` being the attempt's: a start
    after a Slurm requeue claims a fresh folder and counts from 1 again (its run K >= 2 would have a run-K.sh
    there, written by Shepherd before its word)."""
    return recorded if recorded <= 1 or (d / runner.script_name(recorded)).exists() else 1


def read_exit(d: Path, run: int) -> runner.DriverExit | None:
    """The runner's report that driver run `run` exited, once complete."""
    try:
        return runner.parse_exit((d / runner.exit_name(run)).read_text(encoding="utf-8"))
    except OSError:
        return None


def has_word(d: Path, run: int) -> bool:
    return (d / runner.word_name(run)).exists()


def _write_tmp(path: Path, text: str) -> Path:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    return tmp


def install_runner(path: Path) -> None:
    """The shipped runner.sh at `path`, replaced whole (a job of an earlier attempt may be reading the old
    one: sh reads a script as it goes, and keeps the file it opened)."""
    os.replace(_write_tmp(path, runner.script_text()), path)


def write_once(path: Path, text: str) -> None:
    """`text` at `path`, complete or not at all; WordTaken when something is there already."""
    tmp = _write_tmp(path, text)
    try:
        os.link(tmp, path)
    except FileExistsError as exc:
        raise WordTaken(str(path)) from exc
    finally:
        tmp.unlink(missing_ok=True)


def give_run(d: Path, run: int, *, attempt: int, script: str, delay_s: float, pre: str | None = None) -> None:
    """Run again: the next run's command (and `pre`, the step before it, when given) first, each replacing a
    leftover of an interrupted try, then the word."""
    steps = {runner.script_name(run + 1): script}
    if pre is not None:
        steps[runner.pre_name(run + 1)] = pre
    else:
        (d / runner.pre_name(run + 1)).unlink(missing_ok=True)
    for name, text in steps.items():
        os.replace(_write_tmp(d / name, text), d / name)
    write_once(d / runner.word_name(run), runner.word_text("run", attempt=attempt, delay_s=delay_s))


def give_end(d: Path, run: int, *, attempt: int) -> bool:
    """End the job after driver run `run`; False when a word was given already."""
    try:
        write_once(d / runner.word_name(run), runner.word_text("end", attempt=attempt))
    except WordTaken:
        return False
    return True
