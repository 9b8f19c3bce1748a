"""Where an attempt's decisive lines are read from (its driver log and Slurm's output file, tails only), for
an end no rule recognised: the alert, the decision and `shepherd rules suggest` show the cause."""

from __future__ import annotations

from pathlib import Path

from supervisor.domain.runs import AttemptRow, RunRow
from supervisor.rules.decisive import DecisiveLine, decisive_line
from supervisor.slurm.launchers import layout
from supervisor.slurm.submit import attempt_log_base

TAIL_BYTES = 1 << 20  # the last MiB holds the traceback that ended the process, whatever the log's size
_COUNT_CHUNK = 8 << 20


def attempt_logs(runs_dir: Path, run: RunRow, attempt: AttemptRow) -> list[Path]:
    """The attempt's driver log (its newest log folder's, after Slurm requeues) then Slurm's output file;
    an adopted job's own paths where it was adopted from (as the monitor reads them)."""
    if not attempt.job_id:
        return []
    base, own_output = attempt_log_base(run.spec, runs_dir / run.id, attempt.overrides)
    output = own_output if own_output is not None else layout.output_file(base, attempt.job_id)
    folder = layout.current_log_dir(base, attempt.job_id)
    return [*([folder / layout.DRIVER_LOG] if folder is not None else []), output]


def read_tail(path: Path, size: int = TAIL_BYTES) -> tuple[str, int] | None:
    """The file's last `size` bytes from a line start, and that line's number; None when unreadable."""
    try:
        with path.open("rb") as fh:
            end = fh.seek(0, 2)
            start = max(0, end - size)
            newlines = 0
            fh.seek(0)
            while fh.tell() < start:
                newlines += fh.read(min(_COUNT_CHUNK, start - fh.tell())).count(b"\n")
            data = fh.read()
    except OSError:
        return None
    if start:
        cut = data.find(b"\n") + 1  # a partial first line is left out
        data = data[cut:]
        newlines += 1 if cut else 0
    return data.decode("utf-8", "replace"), newlines + 1


def decisive_lines(runs_dir: Path, run: RunRow, attempt: AttemptRow) -> list[DecisiveLine]:
    """The decisive line of each of the attempt's logs that has one, driver log first (blocking I/O: the
    daemon calls it in a worker thread)."""
    found = []
    for path in attempt_logs(runs_dir, run, attempt):
        tail = read_tail(path)
        if tail is None:
            continue
        d = decisive_line(tail[0], path.name, first_line=tail[1])
        if d is not None:
            found.append(d)
    return found
