"""Runs, attempts, history entries and decisions as every stage sees them: the rows the store keeps."""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache
from typing import Any, Literal

from supervisor.domain.jobstate import JobState
from supervisor.domain.spec import JobSpec

# The name a decision about an end no rule claimed is recorded under (act/actions.py), as a rule's would be.
UNRECOGNISED = "unrecognised-failure"


class RunState(StrEnum):
    QUEUED = "QUEUED"  # claimed, first attempt not yet submitted
    SUBMITTING = "SUBMITTING"  # an intent is written; sbatch may or may not have run
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    BACKOFF = "BACKOFF"  # a resume is scheduled for next_action_at
    HELD = "HELD"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"  # stopped and waiting for a human (alerted)
    CANCELLED = "CANCELLED"
    GAVE_UP = "GAVE_UP"
    LOST = "LOST"  # Slurm forgot the job and no record says how it ended

    @property
    def is_final(self) -> bool:
        return self in {
            RunState.COMPLETED,
            RunState.FAILED,
            RunState.CANCELLED,
            RunState.GAVE_UP,
            RunState.LOST,
        }

    @property
    def next_attempt_pending(self) -> bool:
        """The run's next attempt is decided but not yet a job: the last attempt's end settles nothing."""
        return self in {RunState.QUEUED, RunState.SUBMITTING, RunState.BACKOFF}


class AttemptState(StrEnum):
    INTENT = "INTENT"  # written before sbatch
    SUBMITTED = "SUBMITTED"  # sbatch returned a job id
    ENDED = "ENDED"  # Slurm confirmed a terminal state
    NEVER_SUBMITTED = "NEVER_SUBMITTED"  # reconciliation proved sbatch never created it
    SUBMIT_FAILED = "SUBMIT_FAILED"  # sbatch refused the job (bad option, invalid account...)
    UNKNOWN = "UNKNOWN"  # vanished from Slurm past the grace period


@dataclass(frozen=True, slots=True)
class RunRow:
    id: str
    name: str
    spec_json: str
    spec_path: str
    state: RunState
    created_at: float
    updated_at: float
    next_action_at: float | None
    next_attempt_json: str | None
    final_reason: str | None
    held: bool

    @property
    def next_attempt(self) -> dict[str, Any]:
        return dict(json.loads(self.next_attempt_json)) if self.next_attempt_json else {}

    @property
    def spec(self) -> JobSpec:
        """The run's spec (validated when it was claimed; decoded once per distinct text)."""
        return _decode_spec(self.spec_json)


@dataclass(frozen=True, slots=True)
class AttemptRow:
    run_id: str
    n: int
    tag: str
    state: AttemptState
    job_id: str | None
    intent_at: float
    submitted_at: float | None
    started_at: float | None
    ended_at: float | None
    slurm_state: str | None
    reason: str | None
    exit_code: int | None
    nodes: str | None
    checkpoint: str | None
    overrides_json: str | None
    unknown_since: float | None
    last_seen_at: float | None
    exit_signal: int | None = None  # the signal half of Slurm's ExitCode (0:9 -> 9)
    generation: int | None = None  # the lease generation of the daemon that submitted it
    # "slurm": started_at is Slurm's StartTime; "poll": when the daemon saw the job running (Slurm gave none).
    started_from: str | None = None
    ended_from: str | None = None  # likewise for ended_at (EndTime)

    @property
    def overrides(self) -> dict[str, Any]:
        return dict(json.loads(self.overrides_json)) if self.overrides_json else {}

    @property
    def live_job(self) -> str | None:
        """The job id while Slurm may still run the job (never seen: pending; a state word we do not know:
        maybe), else None."""
        if not self.job_id or self.ended_at is not None:
            return None
        try:
            state = JobState(self.slurm_state or JobState.PENDING.value)
        except ValueError:
            return self.job_id
        return self.job_id if state.is_active else None


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    id: int
    run_id: str
    attempt: int | None
    at: float
    kind: str
    message: str
    data: dict[str, Any]


def shown_reason(run: RunRow) -> str | None:
    """The run's reason as shown beside its state: none where it only repeats the state (`COMPLETED —
    completed`)."""
    reason = (run.final_reason or "").strip()
    return reason if reason and reason.lower() != run.state.value.lower() else None


def waits_for_person(run: RunRow, *, given_up_by: str | None) -> bool:
    """A run nothing more happens to until a person acts: stopped and alerted (FAILED), or given up by a rule
    (GAVE_UP, until a person gives it up too: `given_up_by`), or held by a person (until released)."""
    if run.state == RunState.FAILED:
        return True
    if run.state == RunState.GAVE_UP:
        return given_up_by is None
    return run.held and not run.state.is_final


# The actions that change a run's course (decide/plan.py's Resume, GiveUp, Cancel, Hold), as recorded.
STEERING_ACTIONS = frozenset({"resume", "give_up", "cancel", "hold"})


@dataclass(frozen=True, slots=True)
class DecisionRow:
    id: int
    run_id: str
    attempt: int | None
    at: float
    rule: str
    action: str
    signature: str
    reason: str
    evidence: dict[str, Any]
    outcome: str

    @property
    def acted(self) -> bool:
        """Whether this decision steered or alerted: not a follow-up folded into another incident (action
        "none"), not one ignored because the run had moved on ("ignored: ..." outcomes)."""
        return self.action != "none" and not self.outcome.startswith(("ignored", "followup"))

    @property
    def steering(self) -> bool:
        """An acting decision that changed the run's course (not an alert alone)."""
        return self.acted and any(a in STEERING_ACTIONS for a in self.action.split(","))


@dataclass(frozen=True, slots=True)
class StepMark:
    """A training step an attempt reached, when, and the reward logged for it (if the source gave one)."""

    run_id: str
    attempt: int
    step: int
    at: float
    reward: float | None = None


MarkKind = Literal["ray_up", "training", "validation", "checkpointing", "checkpoint"]
MARK_KINDS: tuple[MarkKind, ...] = ("ray_up", "training", "validation", "checkpointing", "checkpoint")


@dataclass(frozen=True, slots=True)
class AttemptMark:
    """A moment or stretch of an attempt the progress source told: Ray up, training begun, a validation or a
    checkpoint save (`at`..`until`; `until` None: still going, or the daemon stopped watching), a checkpoint
    written (`step`)."""

    id: int
    run_id: str
    attempt: int
    kind: MarkKind
    at: float
    until: float | None = None
    step: int | None = None


@lru_cache(maxsize=4096)
def _decode_spec(spec_json: str) -> JobSpec:
    return JobSpec.model_validate_json(spec_json)
