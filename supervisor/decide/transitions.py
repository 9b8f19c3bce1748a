"""How one reconciled Slurm update moves an attempt and its run: a pure function, so each transition is
tested without SQLite or Slurm, and the daemon only writes down what it returns."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from supervisor.domain.jobstate import JobState, describe_exit
from supervisor.domain.notices import Notice
from supervisor.domain.observations import StateEvent
from supervisor.domain.overrides import AttemptOverrides
from supervisor.domain.runs import AttemptRow, AttemptState, RunRow, RunState
from supervisor.slurm.parse import JobObservation, parse_slurm_time
from supervisor.slurm.reconcile import AttemptUpdate, UpdateKind

NEVER_SUBMITTED_MESSAGE = "Slurm has no job with this tag: sbatch never ran; submitting again"


@dataclass(frozen=True, slots=True)
class AttemptWrite:
    """What to record about the attempt: its job found, never submitted, observed, or vanished."""

    kind: Literal["submitted", "never_submitted", "observed", "unknown"]
    job_id: str | None = None
    message: str = ""
    slurm_state: str = ""
    reason: str | None = None
    nodes: str | None = None
    exit_code: int | None = None
    ended: bool = False
    started: bool = False
    unknown_since: float | None = None
    exit_signal: int | None = None
    # When the job started and ended by Slurm's own clock (StartTime, EndTime); None: Slurm gave none, the
    # store falls back to the poll's time and records that it did.
    started_at: float | None = None
    ended_at: float | None = None


def slurm_times(
    obs: JobObservation, *, started: bool, ended: bool, now: float, not_before: float | None = None
) -> tuple[float | None, float | None]:
    """(start, end) of a job that has started / ended, from Slurm's fields; never later than `now` (the
    controller's clock may run ahead of ours) nor before `not_before` (the attempt's intent: Slurm counts
    whole seconds, so a job started within the second of its submission reads as started before it), an
    end never before the start. squeue's StartTime of a pending job is a forecast: only a started job's
    counts."""
    start = parse_slurm_time(obs.start_time) if started else None
    end = parse_slurm_time(obs.end_time) if ended else None
    if start is not None:
        start = min(max(start, not_before if not_before is not None else start), now)
    if end is not None:
        end = max(min(end, now), start) if start is not None else min(end, now)
    return start, end


def resubmitted(run_id: str, n: int, job_id: str, overrides: AttemptOverrides) -> Notice:
    """Attempt n (> 1) is in Slurm's queue. The next link of a planned hop is not announced again: the hop's
    one line in the thread said it (debug: logged, below any thread's level)."""
    return Notice(
        run_id,
        "submitted",
        f"attempt {n} submitted as Slurm job {job_id}",
        text=overrides.reason,
        level="debug" if overrides.planned else "info",
    )


@dataclass(frozen=True, slots=True)
class RunWrite:
    """The run's new state, with the history entry that explains it (if any)."""

    state: RunState
    reason: str | None = None
    event: tuple[str, str, dict[str, Any]] | None = None
    next_attempt: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Transition:
    """Everything one update changes, in the order the daemon applies it."""

    attempt: AttemptWrite | None = None
    run: RunWrite | None = None
    history: tuple[str, str, dict[str, Any]] | None = None  # (kind, message, data) for the attempt
    notice: Notice | None = None
    observation: StateEvent | None = None  # what the rules must see
    wake_scheduler: bool = False
    log: tuple[str, str, dict[str, Any]] | None = None  # (level, message, fields)
    ended: bool = False

    @property
    def changes_nothing(self) -> bool:
        return self.attempt is None and self.run is None and self.observation is None


NOTHING = Transition()


def transition(
    update: AttemptUpdate,
    run: RunRow,
    attempt: AttemptRow,
    *,
    now: float,
    grace_s: float,
    accounting_down: bool = False,
) -> Transition:
    """The transition `update` causes for `attempt` of `run`, as seen at `now`."""
    kind, obs, n = update.kind, update.obs, attempt.n
    if kind in (UpdateKind.FOUND, UpdateKind.NEVER_SUBMITTED) and attempt.state != AttemptState.INTENT:
        return NOTHING  # settled since the poll's snapshot (its sbatch returned meanwhile)
    if kind == UpdateKind.FOUND:
        if obs is None:
            return NOTHING
        return Transition(
            attempt=AttemptWrite("submitted", job_id=obs.job_id),
            log=("info", "intent reconciled with its job", {"attempt": n, "job_id": obs.job_id}),
        )
    if kind == UpdateKind.NEVER_SUBMITTED:
        requeue = not run.state.is_final
        return Transition(
            attempt=AttemptWrite("never_submitted", message=NEVER_SUBMITTED_MESSAGE),
            run=RunWrite(RunState.QUEUED, next_attempt=attempt.overrides) if requeue else None,
            wake_scheduler=requeue,
        )
    if kind == UpdateKind.MISSING:
        return Transition(
            attempt=AttemptWrite(
                "observed",
                slurm_state=attempt.slurm_state or JobState.UNKNOWN.value,
                reason=attempt.reason,
                unknown_since=update.missing_since,
            ),
            log=(
                ("warning", "job not visible in Slurm; treating as unknown, not finished", {"attempt": n})
                if attempt.unknown_since is None
                else None
            ),
        )
    if kind == UpdateKind.UNKNOWN:
        msg = f"job {attempt.job_id} vanished from Slurm (not in squeue or sacct for {grace_s:.0f}s)"
        return Transition(
            attempt=AttemptWrite("unknown", message=msg),
            run=None if run.state.is_final else RunWrite(RunState.LOST, reason=msg, event=("lost", msg, {})),
            observation=StateEvent(run.id, n, attempt.job_id or "", JobState.UNKNOWN, msg, at=now),
        )
    if obs is None:
        return NOTHING
    return _observed(update, run, attempt, now=now, accounting_down=accounting_down)


def _observed(
    update: AttemptUpdate, run: RunRow, attempt: AttemptRow, *, now: float, accounting_down: bool
) -> Transition:
    obs, n = update.obs, attempt.n
    assert obs is not None
    ended = update.kind == UpdateKind.ENDED
    started = obs.state in (JobState.RUNNING, JobState.COMPLETING) or (ended and bool(obs.start_time))
    changed = obs.state.value != attempt.slurm_state or obs.reason != (attempt.reason or "")
    started_at, ended_at = slurm_times(
        obs, started=started, ended=ended, now=now, not_before=attempt.intent_at
    )
    write = AttemptWrite(
        "observed",
        slurm_state=obs.state.value,
        reason=obs.reason,
        nodes=obs.nodes,
        exit_code=obs.exit_code,
        exit_signal=obs.signal if obs.exit_code is not None else None,
        ended=ended,
        started=started,
        unknown_since=update.missing_since,
        started_at=started_at,
        ended_at=ended_at,
    )
    run_write: RunWrite | None = None
    notice: Notice | None = None
    if not run.state.is_final and run.state not in (RunState.BACKOFF, RunState.QUEUED):
        if obs.state == JobState.PENDING and run.state != RunState.PENDING and not run.held:
            run_write = RunWrite(RunState.PENDING)
        elif obs.state == JobState.RUNNING and run.state != RunState.RUNNING:
            what = f"attempt {n} running on {obs.nodes}"
            # The next link of a planned hop is said in the hop's one line, not again when it starts.
            notice = Notice(
                run.id, "started", what, level="debug" if attempt.overrides.get("planned") else "info"
            )
            run_write = RunWrite(RunState.RUNNING, event=("running", what, {"nodes": obs.nodes}))
    if not (changed or ended):
        return Transition(attempt=write, run=run_write, notice=notice)
    observation = StateEvent(
        run.id, n, obs.job_id, obs.state, obs.reason, obs.exit_code, obs.signal, obs.nodes, at=now
    )
    if not ended:
        seen: dict[str, Any] = {"attempt": n, "state": obs.state.value, "reason": obs.reason}
        return Transition(
            attempt=write,
            run=run_write,
            notice=notice,
            observation=observation,
            log=("info", "job state", seen) if changed else None,
        )
    # Settled on squeue's word alone (30 s after it showed the end): sacct could not give the exit code.
    owed = obs.exit_code is None and obs.source == "squeue"
    why = ""
    if owed:
        why = " (exit code not known yet: " + (
            "Slurm accounting (sacct) unavailable; recorded when it answers)"
            if accounting_down
            else "sacct has no record of the job yet)"
        )
    message = (
        f"attempt {n} ended {obs.state.value}"
        + (f" {describe_exit(obs.exit_code, obs.signal)}" if obs.exit_code is not None else "")
        + why
    )
    data: dict[str, Any] = {
        "state": obs.state.value,
        "exit_code": obs.exit_code,
        "signal": obs.signal,
        "exit_code_owed": owed,
    }
    fields: dict[str, Any] = {"attempt": n, "state": obs.state.value, "exit_code": obs.exit_code}
    return Transition(
        attempt=write,
        run=run_write,
        history=("ended", message, data),
        notice=notice,
        observation=observation,
        log=("info", "job ended", {**fields, **({"exit_code_owed": True} if owed else {})}),
        ended=True,
    )
