"""Young/Daly's checkpoint interval, and a save period for it that never makes NeMo RL delete a kept step."""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Literal


def young_daly_interval_s(save_s: float, mtbf_s: float) -> float:
    """The checkpoint interval that minimises lost time: sqrt(2 x save time x MTBF), in seconds.

    Young (1974), "A first order approximation to the optimum checkpoint
    interval", and Daly (2006), "A higher order estimate of the optimum
    checkpoint interval for restart dumps". This is the first-order optimum:
    it balances the time spent saving against the work redone after a failure
    (half an interval on average). It is valid when ``save_s`` is much smaller
    than ``mtbf_s``; Daly's higher-order terms matter only as they approach each other.
    """
    if not (math.isfinite(save_s) and math.isfinite(mtbf_s)) or save_s <= 0 or mtbf_s <= 0:
        raise ValueError(f"save time and MTBF must be positive and finite (got {save_s!r}, {mtbf_s!r})")
    return math.sqrt(2.0 * save_s * mtbf_s)


def interval_steps(interval_s: float, step_s: float) -> int:
    """An interval in seconds as whole training steps (at least one), at ``step_s`` seconds per step."""
    if not (math.isfinite(interval_s) and math.isfinite(step_s)) or interval_s <= 0 or step_s <= 0:
        raise ValueError(
            f"interval and step time must be positive and finite (got {interval_s!r}, {step_s!r})"
        )
    return max(1, round(interval_s / step_s))


def safe_save_period(target: int, old_period: int, kept_steps: Iterable[int]) -> int:
    """The save period nearest to ``target`` steps that keeps every checkpoint NeMo RL now keeps.

    NeMo RL's retention (``CheckpointManager.remove_old_checkpoints``) keeps its
    top-k only among the steps that are multiples of the *current*
    ``save_period`` (plus the latest and ``ft_keep_latest_k``) and deletes
    every other ``step_N``. A checkpoint kept under the old period therefore
    survives the change only if its step is a multiple of the new period too.
    So the new period must divide every kept step aligned to the old period:
    it is a divisor of their greatest common divisor. A multiple of the old
    period (2 x 10 = 20, say) would not do: it would orphan ``step_10`` and
    ``step_30``, which the next save then deletes. Only when nothing aligned is
    kept yet is any period safe. Ties go to the longer period (fewer saves).
    """
    if old_period < 1:
        raise ValueError(f"the old save period must be at least 1 (got {old_period})")
    if target < 1:
        raise ValueError(f"the target must be at least 1 step (got {target})")
    bound = 0
    for step in kept_steps:
        if step > 0 and step % old_period == 0:
            bound = math.gcd(bound, step)
    if bound == 0:
        return target
    divisors = [d for d in range(1, math.isqrt(bound) + 1) if bound % d == 0]
    candidates = set(divisors) | {bound // d for d in divisors}
    return min(candidates, key=lambda p: (abs(p - target), -p))


# ---- the measurements behind it -------------------------------------------------------------------------

MIN_FAILURES = 3  # fewer failures than this in a run's own history is too little to estimate its MTBF from
COPY_SLACK_S = 5.0  # an entry changed this long after its last write was linked or copied (a staged step)


def save_duration(entries: Sequence[tuple[float, float]], dir_ctime: float) -> float | None:
    """How long one save took, from the stat of a complete ``step_N`` dir and of its top-level entries.

    ``entries`` are (mtime, ctime) of what the save wrote at the top of the step (NeMo RL writes
    ``training_info.json`` and ``config.yaml`` first, our trainer its state files); the save began no later
    than the earliest write. It ended at the rename ``tmp_step_N`` -> ``step_N``, which sets the dir's
    ctime (Linux filesystems do), or at its last top-level write where the rename does not. None where
    the files do not tell: nothing inside, or a step staged or copied from another dir (its entries were
    changed long after they were written: a hard link or a copy sets the ctime, not the mtime).
    """
    if not entries or any(ctime - mtime > COPY_SLACK_S for mtime, ctime in entries):
        return None
    began = min(mtime for mtime, _ in entries)
    ended = max(dir_ctime, max(mtime for mtime, _ in entries))
    return ended - began if ended >= began else None


def seconds_per_step(attempts: Iterable[Sequence[tuple[int, float]]]) -> float | None:
    """The median time between consecutive step marks, per step, over every attempt's (step, at) marks.

    The median leaves out the steps that also validated or saved: a save is counted in its own cost.
    """
    rates: list[float] = []
    for marks in attempts:
        ordered = sorted(marks)
        for (s0, t0), (s1, t1) in itertools.pairwise(ordered):
            if s1 > s0 and t1 > t0:
                rates.append((t1 - t0) / (s1 - s0))
    return statistics.median(rates) if rates else None


@dataclass(frozen=True, slots=True)
class Exposure:
    """Failures over time at risk: a run's own over its running seconds, or every run's in the store over
    their node-seconds (a rate per node, so that a run of another size can use it)."""

    failures: int
    seconds: float


@dataclass(frozen=True, slots=True)
class Mtbf:
    """The mean time between failures used, where it came from, and what it rests on."""

    seconds: float
    source: Literal["run", "cluster"]
    failures: int
    hours: float  # running hours (run) or node-hours (cluster) behind it


def choose_mtbf(own: Exposure, cluster: Exposure | None, nodes: int) -> Mtbf | None:
    """The run's own MTBF when its history holds at least `MIN_FAILURES` failures; else the cluster's, per
    node and scaled to the run's `nodes`, when every run in the store holds that many; else None."""
    if own.failures >= MIN_FAILURES and own.seconds > 0:
        return Mtbf(own.seconds / own.failures, "run", own.failures, own.seconds / 3600)
    if cluster is not None and cluster.failures >= MIN_FAILURES and cluster.seconds > 0 and nodes >= 1:
        per_node = cluster.seconds / cluster.failures
        return Mtbf(per_node / nodes, "cluster", cluster.failures, cluster.seconds / 3600)
    return None


@dataclass(frozen=True, slots=True)
class Advice:
    """Young/Daly's interval beside the one in use, with what each number rests on (None: not measured)."""

    save_s: float | None  # the median measured save
    saves: int  # how many saves were timed
    step_s: float | None
    mtbf: Mtbf | None
    own: Exposure
    cluster: Exposure | None
    period: int | None  # the save period in use (steps)
    optimum_s: float | None = None
    optimum_steps: int | None = None
    next_period: int | None = None  # the save period a tuned next attempt gets
    held: str = ""  # why next_period is not optimum_steps

    @property
    def interval_s(self) -> float | None:
        """The interval in use, in seconds: save period x measured seconds per step."""
        return self.period * self.step_s if self.period is not None and self.step_s is not None else None


def advise(
    saves: Sequence[float],
    step_s: float | None,
    own: Exposure,
    cluster: Exposure | None,
    *,
    nodes: int,
    period: int | None,
    kept_steps: Iterable[int] = (),
) -> Advice:
    """Young/Daly's interval from the measured saves, step time and failure rate, and the save period that
    carries it to the next attempt without orphaning a kept checkpoint (`safe_save_period`)."""
    save_s = statistics.median(saves) if saves else None
    mtbf = choose_mtbf(own, cluster, nodes)
    base = Advice(save_s, len(saves), step_s, mtbf, own, cluster, period)
    if save_s is None or save_s <= 0 or mtbf is None:
        return base
    optimum_s = young_daly_interval_s(save_s, mtbf.seconds)
    if step_s is None:
        return replace(base, optimum_s=optimum_s)
    steps = interval_steps(optimum_s, step_s)
    if period is None:
        return replace(base, optimum_s=optimum_s, optimum_steps=steps)
    kept = sorted({s for s in kept_steps if s > 0 and s % period == 0})
    nxt = safe_save_period(steps, period, kept)
    held = ""
    if nxt != steps:
        orphans = [s for s in kept if s % steps != 0]
        held = (
            f"{steps} would leave kept step_{', step_'.join(str(s) for s in orphans[:3])}"
            f"{'...' if len(orphans) > 3 else ''} off its multiples, and NeMo RL's retention deletes "
            f"those: {nxt} divides every kept step"
        )
    return replace(base, optimum_s=optimum_s, optimum_steps=steps, next_period=nxt, held=held)
