"""Young/Daly's checkpoint interval beside the one in use, in words and as JSON, the same for `status RUN` and
`report`; a number that was not measured is said to be so, never guessed."""

from __future__ import annotations

from typing import Any

from supervisor.decide.interval import MIN_FAILURES, Advice, Mtbf
from supervisor.report.text import duration


def _mtbf_source(m: Mtbf) -> str:
    if m.source == "run":
        return f"this run's: {m.failures} failures in {duration(m.hours * 3600)} of running"
    node_time = duration(m.hours * 3600)
    return f"all runs': {m.failures} failures in {node_time} of node time, for this run's nodes"


def _missing(a: Advice) -> str:
    parts = []
    if a.save_s is None:
        parts.append("no save timed yet")
    elif a.save_s <= 0:
        parts.append("the saves were quicker than the files' timestamps can tell")
    if a.mtbf is None:
        here = f"{a.own.failures} failure(s) in {duration(a.own.seconds)} of running here"
        there = f", {a.cluster.failures} in all runs" if a.cluster is not None else ""
        parts.append(f"{here}{there}; {MIN_FAILURES} needed")
    return "; ".join(parts)


def in_use_text(a: Advice) -> str:
    if a.period is None:
        return "save period in use: not known (the command and the checkpoints do not say)"
    if a.interval_s is None or a.step_s is None:
        return f"every {a.period} steps (seconds per step: not measured yet)"
    return f"every {a.period} steps = {duration(a.interval_s)} at {duration(a.step_s)}/step"


def optimum_text(a: Advice) -> str:
    if a.optimum_s is None or a.save_s is None or a.mtbf is None:
        return f"Young/Daly: not measured yet ({_missing(a)})"
    steps = f"{a.optimum_steps} steps = " if a.optimum_steps is not None else ""
    # Young/Daly's first-order optimum assumes a save much shorter than the MTBF.
    rough = (
        "; first-order only: the save is not small against the MTBF" if a.save_s * 10 > a.mtbf.seconds else ""
    )
    return (
        f"Young/Daly: {steps}{duration(a.optimum_s)} from a {duration(a.save_s)} save (median of {a.saves}) "
        f"and a {duration(a.mtbf.seconds)} MTBF ({_mtbf_source(a.mtbf)}{rough})"
    )


def next_text(a: Advice) -> str:
    if a.next_period is None:
        return "next attempt: its save period stays (nothing to tune it from yet)"
    return f"next attempt: checkpointing.save_period={a.next_period}" + (f" ({a.held})" if a.held else "")


def interval_lines(a: Advice, *, tune: bool) -> list[str]:
    """In use, Young/Daly's, and (when the spec tunes the interval) what the next attempt gets."""
    return [f"in use: {in_use_text(a)}", optimum_text(a), *([next_text(a)] if tune else [])]


def interval_json(a: Advice) -> dict[str, Any]:
    return {
        "save_period": a.period,
        "seconds_per_step": a.step_s,
        "interval_s": a.interval_s,
        "save_s": a.save_s,
        "saves_timed": a.saves,
        "mtbf_s": a.mtbf.seconds if a.mtbf else None,
        "mtbf_source": a.mtbf.source if a.mtbf else None,
        "failures": {"run": a.own.failures, "cluster": a.cluster.failures if a.cluster else None},
        "young_daly_s": a.optimum_s,
        "young_daly_steps": a.optimum_steps,
        "next_save_period": a.next_period,
        "held_back": a.held or None,
    }
