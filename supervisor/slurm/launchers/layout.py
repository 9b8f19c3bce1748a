"""The files a ray.sub-style launcher's jobs write, in one place: where the monitor, `shepherd logs`,
Slack's first message and the `ended-not-written` check all look.

Both our ray.sub and NeMo RL's write `$BASE_LOG_DIR/<jobid>-logs/` (after a Slurm requeue
`<jobid>-<restart>-logs/`) holding `ray-head.log`, `ray-worker-*.log`, `ray-driver.log` and the
`STARTED_RAY_HEAD` / `ENDED` markers; Slurm's `--output` is `slurm-<jobid>.out` beside them.
"""

from __future__ import annotations

import fnmatch
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

OUTPUT_PATTERN = "slurm-%j.out"  # sbatch --output, relative to the base log dir
LOG_GLOB = "ray-*.log"
DRIVER_LOG = "ray-driver.log"
HEAD_LOG = "ray-head.log"  # the head's start: written by both ray.subs once they try to start Ray
HEAD_STARTED = "STARTED_RAY_HEAD"
ENDED = "ENDED"
LOG_DIR_RE = re.compile(r"^(?P<job>\d+)(?:-(?P<restart>\d+))?-logs$")
# Our ray.sub's own line in slurm-<jobid>.out, stamped `[ray.sub YYYY-mm-dd HH:MM:SS]` in local time.
DRIVER_EXITED = "driver exited with code"
DRIVER_EXITED_RE = re.compile(r"driver exited with code (-?\d+)")
STAMP_RE = re.compile(r"\[ray\.sub (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\]")
# Slurm's own messages (`slurmstepd-node3: error: ... OOM`, `srun: error: node3: task 5: Bus error`): in a
# launcher's trace they are the only lines the rules read (see FileContract.output_is_trace).
SLURM_MESSAGE_RE = re.compile(r"^(?:slurmstepd|srun|sbatch|salloc)(?:-[\w.-]+)?(?:\[\d+\])?: ")


@dataclass(frozen=True, slots=True)
class FileContract:
    """What a launcher's files mean, where the launchers differ.

    - `ended`: our ray.sub writes ENDED when the driver exits (its absence long after the driver's exit line
      is NeMo RL #1019); NeMo RL's writes it only when the Ray bring-up failed (the job then exits 1).
    - `driver_exit_line`: the launcher logs `driver exited with code N` into Slurm's output file.
    - `output_is_trace`: Slurm's output file holds only the launcher's `set -x` trace, never the driver's
      output (NeMo RL): the rules read only Slurm's own messages there (`rule_text`). The trace also holds
      what the launcher's probes print while Ray comes up (Ray's `Failed to connect to GCS` warnings from
      `ray status`), which in a driver's log would be a real failure.
    - `verdicts`: how the launcher's own refusals start in that trace (NeMo RL's `Error: GPUS_PER_NODE=8 but
      GRES detected is ...`, echoed to stderr): the rules read those lines too.
    """

    name: str
    ended: Literal["driver-exited", "bring-up-failed"]
    driver_exit_line: bool
    output_is_trace: bool
    verdicts: tuple[str, ...] = ()


def rule_text(contract: FileContract, is_output: bool, text: str) -> str:
    """A line as the rules should see it: a launcher trace's lines other than Slurm's messages and the
    launcher's own verdicts are blanked (kept as empty lines so line numbers in evidence stay true)."""
    if (
        is_output
        and contract.output_is_trace
        and not SLURM_MESSAGE_RE.match(text)
        and not text.startswith(contract.verdicts)
    ):
        return ""
    return text


def carries_driver_output(contract: FileContract, name: str, is_output: bool) -> bool:
    """Whether the file holds the driver's output (and so the job-side runner's lines around it): the driver
    log always, Slurm's output file unless it is only the launcher's trace."""
    return name == DRIVER_LOG or (is_output and not contract.output_is_trace)


def output_file(base: Path, job_id: str) -> Path:
    """Slurm's output file of the job (the launcher's own trace, and slurmstepd's messages)."""
    return base / OUTPUT_PATTERN.replace("%j", job_id)


def log_dirs(base: Path, job_id: str) -> list[Path]:
    """`<jobid>-logs/` and, after Slurm requeues, `<jobid>-<restart>-logs/`, as they exist now."""
    if not base.is_dir():
        return []
    return sorted(p for p in base.glob(f"{job_id}-*logs") if _job_of(p.name) == job_id)


def log_dir_names(names: Iterable[str], job_id: str) -> list[str]:
    """`log_dirs` over a listing already made (the poller's, on a shared filesystem): no I/O."""
    return sorted(n for n in names if fnmatch.fnmatchcase(n, f"{job_id}-*logs") and _job_of(n) == job_id)


def log_file_names(names: Iterable[str]) -> list[str]:
    """The Ray logs among a log folder's entries."""
    return sorted(n for n in names if fnmatch.fnmatchcase(n, LOG_GLOB))


def _job_of(name: str) -> str | None:
    m = LOG_DIR_RE.match(name)
    return m.group("job") if m else None


def newest_log_dir(names: Iterable[str], job_id: str) -> str | None:
    """The folder the job writes now: `<jobid>-<restart>-logs/` with the highest restart, or `<jobid>-logs/`.

    Sorting names is wrong here (`-10-` < `-2-` < `-logs`), so the restart count is compared as a number.
    """
    best: tuple[int, str] | None = None
    for name in names:
        m = LOG_DIR_RE.match(name)
        if m is None or m.group("job") != job_id:
            continue
        restart = int(m.group("restart") or 0)
        if best is None or restart > best[0]:
            best = (restart, name)
    return best[1] if best else None


def current_log_dir(base: Path, job_id: str) -> Path | None:
    name = newest_log_dir((d.name for d in log_dirs(base, job_id)), job_id)
    return base / name if name else None


def log_files(base: Path, job_id: str) -> list[Path]:
    """The job's output file, then the Ray logs of each of its log folders."""
    files = [output_file(base, job_id)]
    for d in log_dirs(base, job_id):
        files.extend(sorted(d.glob(LOG_GLOB)))
    return files


def announced_paths(base: Path, job_id: str) -> list[Path]:
    """What to show people first: the driver's log and the output file."""
    return [base / f"{job_id}-logs" / DRIVER_LOG, output_file(base, job_id)]


def driver_exit_time(tail: str, mtime: float) -> float | None:
    """When the launcher's last 'driver exited' line says it was written (its own stamp, local time), else
    the file's mtime; None without such a line. Recovers what a restarted daemon's tailer will not re-read."""
    found = None
    for line in tail.splitlines():
        if DRIVER_EXITED in line and DRIVER_EXITED_RE.search(line):
            found = line
    if found is None:
        return None
    stamp = STAMP_RE.search(found)
    if stamp:
        try:
            return min(time.mktime(time.strptime(stamp.group(1), "%Y-%m-%d %H:%M:%S")), mtime)
        except (ValueError, OverflowError):
            pass
    return mtime


def ended_overdue(present: Iterable[str], driver_exited_at: float | None, now: float, after_s: float) -> bool:
    """NeMo RL #1019: Ray started, the driver exited, ENDED is still missing: the job idles to walltime."""
    names = set(present)
    return (
        driver_exited_at is not None
        and HEAD_STARTED in names
        and ENDED not in names
        and now - driver_exited_at >= after_s
    )
