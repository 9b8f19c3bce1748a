"""Slurm's job states in one place, so "is the job alive" and "is it over" have one answer everywhere."""

from __future__ import annotations

import signal as _signal
from enum import StrEnum


class JobState(StrEnum):
    """Slurm's job states, plus UNKNOWN for "we could not see it" (never a failure)."""

    PENDING = "PENDING"
    CONFIGURING = "CONFIGURING"
    RUNNING = "RUNNING"
    COMPLETING = "COMPLETING"
    SUSPENDED = "SUSPENDED"
    REQUEUED = "REQUEUED"
    RESIZING = "RESIZING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    TIMEOUT = "TIMEOUT"
    CANCELLED = "CANCELLED"
    NODE_FAIL = "NODE_FAIL"
    PREEMPTED = "PREEMPTED"
    OUT_OF_MEMORY = "OUT_OF_MEMORY"
    BOOT_FAIL = "BOOT_FAIL"
    DEADLINE = "DEADLINE"
    UNKNOWN = "UNKNOWN"

    @property
    def is_terminal(self) -> bool:
        return self in TERMINAL_STATES

    @property
    def is_active(self) -> bool:
        return self in ACTIVE_STATES

    @classmethod
    def from_slurm(cls, text: str) -> JobState:
        """`RUNNING`, `R`, `CANCELLED by 0`, `FAILED+`, `SPECIAL_EXIT` ... -> a JobState; a word we do not
        know (a newer Slurm's) is UNKNOWN: never finished, never active."""
        word = slurm_word(text)
        try:
            return cls(word) if word != "UNKNOWN" else cls.UNKNOWN
        except ValueError:
            return SLURM_WORDS.get(word, cls.UNKNOWN)


TERMINAL_STATES = frozenset(
    {
        JobState.COMPLETED,
        JobState.FAILED,
        JobState.TIMEOUT,
        JobState.CANCELLED,
        JobState.NODE_FAIL,
        JobState.PREEMPTED,
        JobState.OUT_OF_MEMORY,
        JobState.BOOT_FAIL,
        JobState.DEADLINE,
    }
)
ACTIVE_STATES = frozenset(
    {
        JobState.PENDING,
        JobState.CONFIGURING,
        JobState.RUNNING,
        JobState.COMPLETING,
        JobState.SUSPENDED,
        JobState.REQUEUED,
        JobState.RESIZING,
    }
)


def describe_exit(exit_code: int | None, signal: int | None) -> str:
    """Slurm's `ExitCode` status:signal in words. A job killed by a signal has status 0, and `exit 0` would
    read as success: `0:9` is "signal 9 (SIGKILL)", `0:125` (Slurm's mark of an OOM kill) "signal 125"."""
    if exit_code is None:
        return ""
    if not signal:
        return f"exit {exit_code}"
    try:
        name = f" ({_signal.Signals(signal).name})"
    except ValueError:
        name = ""
    sig = f"signal {signal}{name}"
    return sig if exit_code == 0 else f"exit {exit_code}, {sig}"


def slurm_word(text: str) -> str:
    """The state word of squeue's `%T`, sacct's `State` or scontrol's `JobState=` (`CANCELLED by 0`:
    CANCELLED)."""
    return text.strip().split(" ", 1)[0].rstrip("+")


# Slurm's other words (squeue's short forms, and the states that read as one of ours). Held jobs are PENDING
# in squeue (reason JobHeldAdmin/JobHeldUser); SPECIAL_EXIT is one too: `scontrol requeuehold
# State=SpecialExit` (or an exit code in RequeueExitHold) requeues the job held, reason `job requeued in held
# state`, and it waits for `scontrol release` like any held job: not finished.
SLURM_WORDS: dict[str, JobState] = {
    "CA": JobState.CANCELLED,
    "CD": JobState.COMPLETED,
    "CF": JobState.CONFIGURING,
    "CG": JobState.COMPLETING,
    "F": JobState.FAILED,
    "NF": JobState.NODE_FAIL,
    "OOM": JobState.OUT_OF_MEMORY,
    "PD": JobState.PENDING,
    "PR": JobState.PREEMPTED,
    "R": JobState.RUNNING,
    "RQ": JobState.REQUEUED,
    "RS": JobState.RESIZING,
    "S": JobState.SUSPENDED,
    "TO": JobState.TIMEOUT,
    "BF": JobState.BOOT_FAIL,
    "DL": JobState.DEADLINE,
    "SE": JobState.PENDING,
    "RH": JobState.PENDING,
    "RF": JobState.REQUEUED,
    "RD": JobState.PENDING,
    "RV": JobState.CANCELLED,
    "SI": JobState.RUNNING,
    "SO": JobState.COMPLETING,
    "ST": JobState.SUSPENDED,
    "REQUEUE_FED": JobState.REQUEUED,
    "REQUEUE_HOLD": JobState.PENDING,
    "SPECIAL_EXIT": JobState.PENDING,
    "STOPPED": JobState.SUSPENDED,
    "SIGNALING": JobState.RUNNING,
    "STAGE_OUT": JobState.COMPLETING,
    "RESV_DEL_HOLD": JobState.PENDING,
    "REVOKED": JobState.CANCELLED,
    "UPDATE_DB": JobState.COMPLETING,
    "POWER_UP_NODE": JobState.CONFIGURING,
    # Slurm 25.11+: a job requeued with `--requeue=expedite`, waiting to start again first in line.
    "EXPEDITING": JobState.REQUEUED,
}
