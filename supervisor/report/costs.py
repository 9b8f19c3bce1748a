"""What a run's allocation bought and what each failure cost, as pure arithmetic over its attempts' times, so
that `shepherd report`, the timeline picture, the Prometheus gauges and the goodput benchmark share one
definition of every number.

A run's wall-clock is cut into consecutive segments, one phase each:

    queued         the attempt decided on -> the job starts (sbatch, scheduler queue)
    bring_up       job start -> the first sign of training (Ray up, model load; `ray_up` is marked inside it)
    productive     training whose steps were kept (before the step the next attempt resumed from)
    validation     validation stretches, checkpointing: checkpoint saves (where the progress source tells)
    checkpointing
    teardown       after the last sign of work until the job ended (a completed attempt's exit)
    redone         lost: training after the step the next attempt resumed from (done again)
    detection      lost: the failure -> the decision (the rule saw it)
    resubmit       lost: the decision -> the next attempt decided on (backoff, the old job's end)
    idle           between attempts with no failure recorded (cancelled and resumed by hand)

A segment is allocated where it overlaps the job's [start, end]; GPU-hours are allocated seconds x GPUs.
Goodput = productive GPU-hours / allocated GPU-hours.
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from supervisor.decide.policy import FREE_CATEGORIES

PHASES = (
    "queued",
    "bring_up",
    "productive",
    "validation",
    "checkpointing",
    "teardown",
    "redone",
    "detection",
    "resubmit",
    "idle",
)
LOST = ("redone", "detection", "resubmit")
STRETCH_KINDS = ("validation", "checkpointing")

Interval = tuple[float, float]


@dataclass(frozen=True, slots=True)
class Failure:
    """How an attempt ended badly: the rule that decided it, when the failure happened, when it was seen."""

    rule: str
    category: str
    failed_at: float
    detected_at: float


@dataclass(frozen=True, slots=True)
class AttemptFacts:
    """One attempt as the store (or a simulation) knows it.

    `kept_step`: the step the run kept from this attempt's work (the next attempt resumed from it; for the
    last attempt, its newest checkpoint); None: not known, so nothing is counted as redone.
    """

    n: int
    gpus: float
    submitted_at: float
    started_at: float | None = None
    ended_at: float | None = None
    start_step: int | None = 0
    steps: tuple[tuple[int, float], ...] = ()
    ray_up_at: float | None = None
    training_at: float | None = None
    stretches: tuple[tuple[str, float, float | None], ...] = ()
    checkpoints: tuple[tuple[int, float], ...] = ()
    rewards: tuple[tuple[float, float], ...] = ()  # (at, reward), for the picture
    failure: Failure | None = None
    kept_step: int | None = None
    # Where started_at / ended_at came from: "slurm" (StartTime / EndTime), "poll" (when the daemon saw it:
    # Slurm gave none), None (not known: a store from before this was recorded, or a simulation).
    started_from: str | None = None
    ended_from: str | None = None


@dataclass(frozen=True, slots=True)
class Segment:
    phase: str
    start: float
    end: float

    @property
    def seconds(self) -> float:
        return max(0.0, self.end - self.start)


@dataclass(frozen=True, slots=True)
class FailureCost:
    """What one failure cost: its own lost time, plus the next attempt's queue wait and bring-up."""

    attempt: int
    rule: str
    category: str
    failed_at: float
    detected_at: float
    redone_s: float
    detection_s: float
    resubmit_s: float
    requeue_s: float  # the next attempt's queue wait
    bring_up_s: float  # the next attempt's bring-up
    steps_redone: int | None
    gpu_hours: float  # allocated GPU-hours lost: redone, detection and resubmission while allocated, bring-up

    @property
    def shepherd_s(self) -> float:
        """The supervisor's own share: detection and resubmission (not the queue, not the recompute)."""
        return self.detection_s + self.resubmit_s

    @property
    def total_s(self) -> float:
        return self.redone_s + self.detection_s + self.resubmit_s + self.requeue_s + self.bring_up_s


@dataclass(frozen=True, slots=True)
class AttemptCost:
    n: int
    gpus: float
    started_at: float | None
    ended_at: float | None
    segments: tuple[Segment, ...]
    seconds: Mapping[str, float]
    gpu_hours: Mapping[str, float]
    failure: Failure | None
    facts: AttemptFacts


@dataclass(frozen=True, slots=True)
class Cost:
    """A run's (or several runs') split of wall-clock and allocated GPU-hours, and its failures."""

    wall_s: float
    seconds: Mapping[str, float]
    gpu_hours: Mapping[str, float]
    failures: tuple[FailureCost, ...]
    running_s: float  # job time (start to end) summed over attempts
    attempts: int
    restarts: int
    attempt_costs: tuple[AttemptCost, ...] = field(default=())

    @property
    def allocated_gpu_hours(self) -> float:
        return sum(self.gpu_hours.values())

    @property
    def goodput(self) -> float | None:
        total = self.allocated_gpu_hours
        return self.gpu_hours.get("productive", 0.0) / total if total > 0 else None

    @property
    def lost_s(self) -> float:
        return sum(self.seconds.get(p, 0.0) for p in LOST)

    @property
    def failures_by_rule(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for f in self.failures:
            out[f.rule] = out.get(f.rule, 0) + 1
        return dict(sorted(out.items(), key=lambda kv: (-kv[1], kv[0])))

    @property
    def mtbf_s(self) -> float | None:
        """Job time per failure; time limits and preemptions are the chain working, not failures."""
        n = sum(1 for f in self.failures if f.category not in FREE_CATEGORIES)
        return self.running_s / n if n else None


def _clip(t: float, lo: float, hi: float) -> float:
    return min(max(t, lo), hi)


def _merge(intervals: Iterable[Interval]) -> list[Interval]:
    out: list[Interval] = []
    for a, b in sorted(i for i in intervals if i[1] > i[0]):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _overlap(a: Interval, b: Interval) -> float:
    return max(0.0, min(a[1], b[1]) - max(a[0], b[0]))


def time_at_step(facts: AttemptFacts, step: int, start: float, end: float) -> float:
    """When the attempt reached `step`: its mark, else linear between the marks around it (the attempt's
    start step at `start`); a step past its last mark is never reached: `end`."""
    known = [(facts.start_step or 0, start), *((s, t) for s, t in facts.steps)]
    for (s0, t0), (s1, t1) in itertools.pairwise(known):
        if s0 <= step <= s1 and s1 > s0:
            return _clip(t0 + (t1 - t0) * (step - s0) / (s1 - s0), start, end)
    return end


def kept_until(f: AttemptFacts, kept_step: int, t0: float, work_end: float) -> float:
    """When the attempt's kept work ends: its checkpoint of `kept_step` written (the save included), else the
    step reached; nothing kept (it resumed from there itself or earlier): the start of training."""
    if f.start_step is not None and kept_step <= f.start_step:
        return t0
    written = [t for s, t in f.checkpoints if s == kept_step]
    if written:
        return _clip(min(written), t0, work_end)
    return time_at_step(f, kept_step, t0, work_end)


def _training_start(f: AttemptFacts, started: float, work_end: float) -> float:
    """The first sign of training; else the first step less a typical step; else Ray up; else the start."""
    if f.training_at is not None:
        return _clip(f.training_at, started, work_end)
    if f.steps:
        times = [t for _, t in f.steps]
        gaps = [b - a for a, b in itertools.pairwise(times) if b > a]
        typical = statistics.median(gaps) if gaps else 0.0
        return _clip(times[0] - typical, started, work_end)
    if f.ray_up_at is not None:
        return _clip(f.ray_up_at, started, work_end)
    return started


def _no_training(f: AttemptFacts) -> bool:
    nothing_kept = f.kept_step is None or (f.start_step is not None and f.kept_step <= f.start_step)
    return f.training_at is None and not f.steps and not f.stretches and nothing_kept


def _last_work(f: AttemptFacts, started: float, end: float) -> float:
    """The last sign of work of an attempt that ended without a failure (its last step or stretch)."""
    signs = [t for _, t in f.steps] + [u for _, _, u in f.stretches if u is not None]
    return _clip(max(signs), started, end) if signs else end


def _stretches(f: AttemptFacts, lo: float, hi: float) -> list[tuple[str, Interval]]:
    """Validation and checkpoint stretches inside [lo, hi]; an open one ends at the next one or at `hi`."""
    ordered = sorted(f.stretches, key=lambda s: s[1])
    out: list[tuple[str, Interval]] = []
    for i, (kind, a, b) in enumerate(ordered):
        if kind not in STRETCH_KINDS:
            continue
        end = b if b is not None else (ordered[i + 1][1] if i + 1 < len(ordered) else hi)
        a, end = _clip(a, lo, hi), _clip(end, lo, hi)
        if end > a:
            out.append((kind, (a, end)))
    # Overlaps (a restart may mark a stretch twice) go to the earlier stretch.
    cleaned: list[tuple[str, Interval]] = []
    cursor = lo
    for kind, (a, b) in sorted(out, key=lambda x: x[1]):
        a = max(a, cursor)
        if b > a:
            cleaned.append((kind, (a, b)))
            cursor = b
    return cleaned


def _training_segments(f: AttemptFacts, t0: float, keep: float, t1: float) -> list[Segment]:
    """[t0, t1] cut into productive (before `keep`), redone (after it), validation and checkpointing
    (stretches before `keep`; after it they were lost with the rest)."""
    segs: list[Segment] = []
    cursor = t0
    for kind, (a, b) in _stretches(f, t0, t1):
        segs += _split(cursor, a, keep)
        if b <= keep:
            segs.append(Segment(kind, a, b))
        elif a >= keep:
            segs.append(Segment("redone", a, b))
        else:
            segs += [Segment(kind, a, keep), Segment("redone", keep, b)]
        cursor = b
    segs += _split(cursor, t1, keep)
    return [s for s in segs if s.end > s.start]


def _split(a: float, b: float, keep: float) -> list[Segment]:
    if b <= a:
        return []
    if b <= keep:
        return [Segment("productive", a, b)]
    if a >= keep:
        return [Segment("redone", a, b)]
    return [Segment("productive", a, keep), Segment("redone", keep, b)]


def attempt_segments(f: AttemptFacts, next_submitted: float | None, now: float) -> list[Segment]:
    """The attempt's part of the run's wall-clock, from its submission to the next attempt's."""
    segs: list[Segment] = []
    q0 = f.submitted_at
    end = f.ended_at if f.ended_at is not None else now
    end = max(end, q0)
    fail = f.failure
    if f.started_at is None:
        segs.append(Segment("queued", q0, end))
        last = end
        if fail is not None:
            detected = max(fail.detected_at, end)
            segs.append(Segment("detection", end, detected))
            last = detected
    else:
        start = _clip(f.started_at, q0, end)
        segs.append(Segment("queued", q0, start))
        if fail is not None:
            failed = _clip(fail.failed_at, start, max(end, fail.failed_at))
            work_end = min(failed, end)
        elif f.ended_at is None:
            work_end = end
        else:
            work_end = _last_work(f, start, end)
        t0 = _training_start(f, start, work_end)
        if fail is not None and _no_training(f):
            t0 = work_end  # no sign of training and nothing kept: it never got past bring-up
        segs.append(Segment("bring_up", start, t0))
        keep = work_end
        if fail is not None and f.kept_step is not None:
            keep = kept_until(f, f.kept_step, t0, work_end)
        segs += _training_segments(f, t0, keep, work_end)
        if fail is None:
            segs.append(Segment("teardown", work_end, end))
            last = end
        else:
            detected = max(fail.detected_at, work_end)
            segs.append(Segment("detection", work_end, detected))
            last = detected
            if end > detected:
                segs.append(Segment("resubmit", detected, end))
                last = end
    if next_submitted is not None and next_submitted > last:
        segs.append(Segment("resubmit" if fail is not None else "idle", last, next_submitted))
    if next_submitted is not None:
        # The old job may still be completing when the next attempt is submitted: the run's wall-clock is
        # counted once, so its last seconds go to the next attempt (whose queue wait holds no GPUs).
        segs = [Segment(s.phase, s.start, min(s.end, next_submitted)) for s in segs]
    return [s for s in segs if s.end > s.start]


def cost(attempts: Sequence[AttemptFacts], now: float) -> Cost:
    """The split of one run (its attempts in order) as seen at `now`."""
    seconds = dict.fromkeys(PHASES, 0.0)
    gpu_h = dict.fromkeys(PHASES, 0.0)
    costs: list[AttemptCost] = []
    running = 0.0
    for i, f in enumerate(attempts):
        nxt = attempts[i + 1] if i + 1 < len(attempts) else None
        segs = attempt_segments(f, nxt.submitted_at if nxt else None, now)
        alloc: Interval | None = None
        if f.started_at is not None:
            alloc = (f.started_at, f.ended_at if f.ended_at is not None else now)
            if nxt is not None:
                alloc = (alloc[0], min(alloc[1], max(alloc[0], nxt.submitted_at)))
            running += max(0.0, alloc[1] - alloc[0])
        a_sec = dict.fromkeys(PHASES, 0.0)
        a_gpu = dict.fromkeys(PHASES, 0.0)
        for s in segs:
            a_sec[s.phase] += s.seconds
            if alloc is not None:
                a_gpu[s.phase] += _overlap((s.start, s.end), alloc) * f.gpus / 3600.0
        for p in PHASES:
            seconds[p] += a_sec[p]
            gpu_h[p] += a_gpu[p]
        costs.append(
            AttemptCost(f.n, f.gpus, f.started_at, f.ended_at, tuple(segs), a_sec, a_gpu, f.failure, f)
        )
    failures = tuple(
        _failure_cost(c, costs[i + 1] if i + 1 < len(costs) else None)
        for i, c in enumerate(costs)
        if c.failure is not None
    )
    first = min((f.submitted_at for f in attempts), default=now)
    last = max((s.end for c in costs for s in c.segments), default=first)
    return Cost(
        wall_s=max(0.0, last - first),
        seconds=seconds,
        gpu_hours=gpu_h,
        failures=failures,
        running_s=running,
        attempts=len(attempts),
        restarts=max(0, len(attempts) - 1),
        attempt_costs=tuple(costs),
    )


def _failure_cost(c: AttemptCost, nxt: AttemptCost | None) -> FailureCost:
    assert c.failure is not None
    f = c.facts
    reached = max((s for s, _ in f.steps), default=None)
    redone_steps = None
    if f.kept_step is not None and reached is not None:
        redone_steps = max(0, reached - max(f.kept_step, f.start_step or 0))
    lost = sum(c.gpu_hours[p] for p in LOST) + (nxt.gpu_hours["bring_up"] if nxt else 0.0)
    return FailureCost(
        attempt=c.n,
        rule=c.failure.rule,
        category=c.failure.category,
        failed_at=c.failure.failed_at,
        detected_at=c.failure.detected_at,
        redone_s=c.seconds["redone"],
        detection_s=c.seconds["detection"],
        resubmit_s=c.seconds["resubmit"],
        requeue_s=nxt.seconds["queued"] if nxt else 0.0,
        bring_up_s=nxt.seconds["bring_up"] if nxt else 0.0,
        steps_redone=redone_steps,
        gpu_hours=lost,
    )


def combine(costs: Iterable[Cost]) -> Cost:
    """Several runs summed (wall-clock too: the sum of each run's, not the span of all)."""
    items = list(costs)
    seconds = {p: sum(c.seconds.get(p, 0.0) for c in items) for p in PHASES}
    gpu_h = {p: sum(c.gpu_hours.get(p, 0.0) for c in items) for p in PHASES}
    return Cost(
        wall_s=sum(c.wall_s for c in items),
        seconds=seconds,
        gpu_hours=gpu_h,
        failures=tuple(f for c in items for f in c.failures),
        running_s=sum(c.running_s for c in items),
        attempts=sum(c.attempts for c in items),
        restarts=sum(c.restarts for c in items),
    )
