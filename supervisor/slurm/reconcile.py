"""Reconcile what the store believes with what Slurm says: a pure function.

The rules that keep supervision honest live here:
- jobs are matched by their tag (run id + attempt in `--comment`), never by id
  alone, because a slurmctld crash can hand the same id to another job;
- a job missing from both squeue and sacct is *unknown* for a grace period,
  never "finished"; only a confirmed terminal state ends an attempt;
- an intent whose job Slurm has never heard of was never submitted.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from supervisor.domain.runs import AttemptRow, AttemptState
from supervisor.slurm.parse import JobObservation


class UpdateKind(StrEnum):
    FOUND = "found"  # an intent's job exists: record its id
    OBSERVED = "observed"  # still active: state/reason/nodes
    ENDED = "ended"  # confirmed terminal state
    MISSING = "missing"  # not seen anywhere, still within the grace period
    UNKNOWN = "unknown"  # not seen anywhere past the grace period
    NEVER_SUBMITTED = "never_submitted"  # an intent Slurm has no trace of


@dataclass(frozen=True, slots=True)
class AttemptUpdate:
    run_id: str
    n: int
    kind: UpdateKind
    obs: JobObservation | None = None
    missing_since: float | None = None


def _by_tag(observations: Iterable[JobObservation]) -> dict[tuple[str, int], JobObservation]:
    out: dict[tuple[str, int], JobObservation] = {}
    for obs in observations:
        tag = obs.tag
        if tag is None:
            continue
        prev = out.get(tag)
        # After a requeue or id reuse prefer the highest job id: it is the newest.
        if prev is None or int(obs.job_id.split("_")[0]) >= int(prev.job_id.split("_")[0]):
            out[tag] = obs
    return out


ADOPTED_TAG_PREFIX = "job:"  # an attempt adopted from a job submitted by hand: no tag of ours in Slurm


def adopted_tag(job_id: str) -> str:
    return f"{ADOPTED_TAG_PREFIX}{job_id}"


IN_PLACE_TAG_PREFIX = "inplace:"  # a driver run restarted inside the job of an earlier attempt (its tag's)


def in_place_tag(run_id: str, n: int, origin: int) -> str:
    """Attempt n's tag when it runs in the job attempt `origin` submitted: Slurm knows that job by origin's
    tag (name and comment), so it is found by that, never by its id alone."""
    return f"{IN_PLACE_TAG_PREFIX}{origin}:{run_id}:{n}"


def in_place_origin(tag: str) -> int | None:
    """The attempt whose job an in-place attempt runs in, from its tag; None for any other tag."""
    if not tag.startswith(IN_PLACE_TAG_PREFIX):
        return None
    origin = tag[len(IN_PLACE_TAG_PREFIX) :].split(":", 1)[0]
    return int(origin) if origin.isdigit() else None


class _Seen:
    """What one Slurm answer says, found by our tag, or by job id for an adopted attempt (its job carries no
    tag of ours; its id is safe to match: we learnt it from Slurm while the job existed)."""

    def __init__(self, observations: Iterable[JobObservation]) -> None:
        obs = list(observations)
        self.by_tag = _by_tag(obs)
        self.by_id = {o.job_id: o for o in obs}

    def of(self, a: AttemptRow) -> JobObservation | None:
        if a.tag.startswith(ADOPTED_TAG_PREFIX):
            return self.by_id.get(a.job_id or "")
        origin = in_place_origin(a.tag)
        if origin is not None:
            obs = self.by_tag.get((a.run_id, origin))
            return obs if obs is not None and obs.job_id == a.job_id else None
        return self.by_tag.get((a.run_id, a.n))


def sacct_needed(attempts: Sequence[AttemptRow], squeue: Sequence[JobObservation]) -> list[str]:
    """Job ids whose final state (or exit code) only sacct can tell."""
    seen = _Seen(squeue)
    ids = []
    for a in attempts:
        if a.state != AttemptState.SUBMITTED or a.job_id is None:
            continue
        obs = seen.of(a)
        if obs is None or obs.state.is_terminal:
            ids.append(a.job_id)
    return ids


def reconcile(
    attempts: Sequence[AttemptRow],
    squeue: Sequence[JobObservation],
    sacct: Sequence[JobObservation] | None,
    *,
    now: float,
    grace_s: float,
    in_flight: frozenset[tuple[str, int]] = frozenset(),
    terminal_wait_s: float = 30.0,
) -> list[AttemptUpdate]:
    """One update per open attempt that changed or needs attention.

    `sacct` is None when sacct could not be asked this time: then nothing may be
    concluded from a job's absence.
    """
    live = _Seen(squeue)
    final = _Seen(sacct or ())
    updates: list[AttemptUpdate] = []
    for a in attempts:
        key = (a.run_id, a.n)
        if key in in_flight:
            continue  # sbatch is running right now in this process
        obs = live.of(a)
        done = final.of(a)
        if a.state == AttemptState.INTENT:
            if obs is not None or done is not None:
                updates.append(AttemptUpdate(a.run_id, a.n, UpdateKind.FOUND, obs or done))
            elif sacct is not None:
                updates.append(AttemptUpdate(a.run_id, a.n, UpdateKind.NEVER_SUBMITTED))
            continue
        if a.state != AttemptState.SUBMITTED:
            continue
        if obs is not None and not obs.state.is_terminal:
            updates.append(AttemptUpdate(a.run_id, a.n, UpdateKind.OBSERVED, obs))
        elif done is not None and done.state.is_terminal:
            # sacct has the exit code; keep squeue's view of the state if sacct still lags.
            updates.append(AttemptUpdate(a.run_id, a.n, UpdateKind.ENDED, done))
        elif obs is not None:
            # Terminal in squeue but not yet in sacct: wait a little for the exit code, then settle on
            # squeue's word (a confirmed state), even if sacct is down (slurmdbd outage): only the exit
            # code is missing then.
            first = a.unknown_since or now
            if now - first >= terminal_wait_s:
                updates.append(AttemptUpdate(a.run_id, a.n, UpdateKind.ENDED, obs))
            else:
                updates.append(AttemptUpdate(a.run_id, a.n, UpdateKind.OBSERVED, obs, missing_since=first))
        elif sacct is None:
            continue  # could not ask sacct: conclude nothing
        else:
            since = a.unknown_since or now
            kind = UpdateKind.UNKNOWN if now - since >= grace_s else UpdateKind.MISSING
            updates.append(AttemptUpdate(a.run_id, a.n, kind, None, missing_since=since))
    return updates
