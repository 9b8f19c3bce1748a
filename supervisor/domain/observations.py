"""Typed values that flow from the watchers into the rules engine.

Every watcher (Slurm poller, log tailer, progress/metrics readers, the clock)
turns what it saw into one of these frozen records; the engine never touches
files or Slurm itself, which keeps it a pure function that tests can drive.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from supervisor.domain.jobstate import JobState


@dataclass(frozen=True, slots=True)
class LogEvent:
    """One logical log event: a single line, or a whole traceback grouped into one.

    `first_line` is the 1-based line number of `lines[0]` in `source`; `source`
    is the file's base name (``ray-driver.log``, ``slurm-123.out``...).
    """

    run_id: str
    attempt: int
    source: str
    first_line: int
    lines: tuple[str, ...]
    at: float

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


@dataclass(frozen=True, slots=True)
class StateEvent:
    """The Slurm state of an attempt's job as last observed (confirmed, never guessed)."""

    run_id: str
    attempt: int
    job_id: str
    state: JobState
    reason: str = ""
    exit_code: int | None = None
    signal: int | None = None
    nodes: str = ""
    at: float = 0.0


@dataclass(frozen=True, slots=True)
class ProgressEvent:
    """Forward motion of a run: a training step, a rollout bar count, a status.json update."""

    run_id: str
    attempt: int
    key: str  # "step", "rollouts", "status"
    value: float
    total: float | None = None
    at: float = 0.0
    detail: dict[str, object] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class MetricEvent:
    """One scalar from TensorBoard or metrics.jsonl."""

    run_id: str
    attempt: int
    tag: str
    step: int
    value: float
    at: float = 0.0


@dataclass(frozen=True, slots=True)
class Tick:
    """The clock: lets duration-based triggers (pending, stalled, missing) fire without new input."""

    at: float


Event = LogEvent | StateEvent | ProgressEvent | MetricEvent | Tick
