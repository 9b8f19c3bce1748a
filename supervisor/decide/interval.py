"""Young/Daly's checkpoint interval, and a save period for it that never makes NeMo RL delete a kept step."""

from __future__ import annotations

import math
from collections.abc import Iterable


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
