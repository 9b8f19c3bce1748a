"""A report in words and as JSON: the same numbers for `shepherd report`, `--json` and Slack."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from supervisor.report.costs import PHASES, Cost, FailureCost, combine
from supervisor.report.read import RunReport

LABELS = {
    "queued": "queued",
    "bring_up": "bring-up (job start -> first step)",
    "productive": "productive training",
    "validation": "validation",
    "checkpointing": "checkpointing",
    "teardown": "teardown (last step -> job end)",
    "redone": "lost: work redone",
    "detection": "lost: failure -> detection",
    "resubmit": "lost: detection -> resubmit (backoff)",
    "idle": "idle (no failure recorded)",
}


def duration(seconds: float | None) -> str:
    """1.5s, 3m07s, 2h05m, 3d04h: precise enough to check a demo, short enough for a table."""
    if seconds is None:
        return "-"
    s = max(0.0, seconds)
    if s < 60:
        return f"{s:.1f}s"
    whole = int(s)
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    if whole < 86400:
        return f"{whole // 3600}h{(whole % 3600) // 60:02d}m"
    return f"{whole // 86400}d{(whole % 86400) // 3600:02d}h"


def percent(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def failure_json(f: FailureCost) -> dict[str, Any]:
    return {
        "attempt": f.attempt,
        "rule": f.rule,
        "category": f.category,
        "failed_at": f.failed_at,
        "detected_at": f.detected_at,
        "redone_s": f.redone_s,
        "steps_redone": f.steps_redone,
        "detection_s": f.detection_s,
        "resubmit_s": f.resubmit_s,
        "requeue_s": f.requeue_s,
        "bring_up_s": f.bring_up_s,
        "shepherd_s": f.shepherd_s,
        "total_s": f.total_s,
        "gpu_hours": f.gpu_hours,
    }


def cost_json(c: Cost) -> dict[str, Any]:
    return {
        "wall_s": c.wall_s,
        "allocated_gpu_hours": c.allocated_gpu_hours,
        "goodput": c.goodput,
        "seconds": dict(c.seconds),
        "gpu_hours": dict(c.gpu_hours),
        "lost_s": c.lost_s,
        "attempts": c.attempts,
        "restarts": c.restarts,
        "running_s": c.running_s,
        "mtbf_s": c.mtbf_s,
        "failures_by_rule": c.failures_by_rule,
        "failures": [failure_json(f) for f in c.failures],
    }


def report_json(r: RunReport) -> dict[str, Any]:
    c = r.cost
    return {
        "run": r.run.id,
        "name": r.run.name,
        "state": r.run.state.value,
        "gpus": r.gpus,
        "gpu_unit": r.gpu_unit,
        **cost_json(c),
        "attempt_detail": [
            {
                "attempt": a.n,
                "started_at": a.started_at,
                "ended_at": a.ended_at,
                "times_from": {"start": a.facts.started_from, "end": a.facts.ended_from},
                "seconds": {p: v for p, v in a.seconds.items() if v},
                "gpu_hours": {p: v for p, v in a.gpu_hours.items() if v},
                "segments": [[s.phase, s.start, s.end] for s in a.segments],
            }
            for a in c.attempt_costs
        ],
    }


def reports_json(
    reports: Sequence[RunReport], intervals: Mapping[str, Mapping[str, Any]] | None = None
) -> dict[str, Any]:
    """`intervals`: each run's checkpoint interval (report/interval.py's JSON), by run id."""
    runs = [
        {**report_json(r), **({"checkpoint_interval": intervals.get(r.run.id)} if intervals else {})}
        for r in reports
    ]
    return {"runs": runs, "total": cost_json(combine(r.cost for r in reports))}


def _table(c: Cost, unit: str) -> list[str]:
    alloc = c.allocated_gpu_hours
    lines = [f"  {'phase':<40} {'wall-clock':>10} {unit + '-hours':>11} {'of allocated':>13}"]
    for p in PHASES:
        sec, gh = c.seconds.get(p, 0.0), c.gpu_hours.get(p, 0.0)
        if not sec:
            continue
        share = percent(gh / alloc) if alloc > 0 and gh > 0 else "-"
        lines.append(f"  {LABELS[p]:<40} {duration(sec):>10} {gh:>11.3f} {share:>13}")
    return lines


def _failures(c: Cost) -> list[str]:
    if not c.failures:
        return ["  no failures"]
    lines = [
        "  failures by cause: "
        + ", ".join(f"{rule} x{n}" for rule, n in c.failures_by_rule.items())
        + f"; mean time between failures {duration(c.mtbf_s)}; restarts {c.restarts}",
        f"  {'att':>3} {'rule':<24} {'failed at':<9} {'redone':>12} {'detection':>9} {'resubmit':>9}"
        f" {'requeue':>8} {'bring-up':>8} {'lost h':>8}",
    ]
    for f in c.failures:
        redone = duration(f.redone_s) + (f" ({f.steps_redone})" if f.steps_redone is not None else "")
        lines.append(
            f"  {f.attempt:>3} {f.rule[:24]:<24} {time.strftime('%H:%M:%S', time.localtime(f.failed_at)):<9}"
            f" {redone:>12} {duration(f.detection_s):>9} {duration(f.resubmit_s):>9}"
            f" {duration(f.requeue_s):>8} {duration(f.bring_up_s):>8} {f.gpu_hours:>8.3f}"
        )
    return lines


def poll_timed(c: Cost) -> list[str]:
    """Attempts whose start or end is the daemon's poll time because Slurm gave none, as `2 (end)`; the
    phases around those times may be off by up to a poll interval."""
    out = []
    for a in c.attempt_costs:
        which = [
            name
            for name, src, at in (
                ("start", a.facts.started_from, a.started_at),
                ("end", a.facts.ended_from, a.ended_at),
            )
            if src == "poll" and at is not None
        ]
        if which:
            out.append(f"{a.n} ({' and '.join(which)})")
    return out


def report_lines(r: RunReport) -> list[str]:
    c = r.cost
    head = (
        f"{r.run.id} ({r.run.state.value}): {c.attempts} attempt(s), wall-clock {duration(c.wall_s)}, "
        f"{c.allocated_gpu_hours:.3f} {r.gpu_unit}-hours allocated ({r.gpus:g} {r.gpu_unit}s), "
        f"goodput {percent(c.goodput)}"
    )
    polled = poll_timed(c)
    note = (
        [f"  times of attempt {', '.join(polled)} are when Shepherd saw the change: Slurm gave none"]
        if polled
        else []
    )
    return [head, *_table(c, r.gpu_unit), *_failures(c), *note]


def reports_text(reports: Sequence[RunReport], intervals: Mapping[str, Sequence[str]] | None = None) -> str:
    """`intervals`: each run's checkpoint interval lines (report/interval.py), by run id."""
    out: list[str] = []
    for r in reports:
        said = (intervals or {}).get(r.run.id) or ()
        out += [*report_lines(r), *(f"  checkpoint interval {line}" for line in said), ""]
    if len(reports) > 1:
        total = combine(r.cost for r in reports)
        units = {r.gpu_unit for r in reports}
        unit = units.pop() if len(units) == 1 else "GPU/node"
        out += [
            f"all {len(reports)} runs: wall-clock {duration(total.wall_s)} (summed), "
            f"{total.allocated_gpu_hours:.3f} {unit}-hours allocated, goodput {percent(total.goodput)}",
            *_table(total, unit),
            *_failures(total),
        ]
    return "\n".join(out).rstrip() + "\n"


def slack_summary(r: RunReport) -> str:
    """Two lines for the run's thread, above the timeline picture."""
    c = r.cost
    lost = ", ".join(
        f"{LABELS[p].removeprefix('lost: ')} {duration(c.seconds[p])}"
        for p in ("redone", "detection", "resubmit")
        if c.seconds.get(p)
    )
    causes = ", ".join(f"{rule} x{n}" for rule, n in c.failures_by_rule.items()) or "none"
    return (
        f"goodput {percent(c.goodput)} of {c.allocated_gpu_hours:.2f} {r.gpu_unit}-hours over "
        f"{duration(c.wall_s)}; failures: {causes}" + (f"; lost: {lost}" if lost else "")
    )


def timeline_title(r: RunReport) -> str:
    """The title of the timeline picture in the run's thread."""
    return f"{r.run.name}: timeline ({slack_summary(r)})"
