"""The run's timeline picture: where its GPU time went. Attempts as bars on a time axis coloured by phase,
each failure marked with the rule that caught it, checkpoint ticks, and the reward curve underneath on the
same axis, so one look shows what a failure cost and when the run was learning."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from supervisor.notify.plot import pyplot, pyplot_lock
from supervisor.report.costs import PHASES
from supervisor.report.read import RunReport
from supervisor.report.text import LABELS, duration, percent

COLOURS = {
    "queued": "#e0e0e0",
    "bring_up": "#9ecae1",
    "productive": "#31a354",
    "validation": "#756bb1",
    "checkpointing": "#3182bd",
    "teardown": "#737373",
    "redone": "#fd8d3c",
    "detection": "#e6550d",
    "resubmit": "#a63603",
    "idle": "#f0f0f0",
}


def render_timeline(report: RunReport, out_png: Path) -> Path:
    """Write the PNG and return its path. Thread-safe (one pyplot drawing at a time)."""
    with pyplot_lock():
        return _render(report, Path(out_png))


def _unit(wall_s: float) -> tuple[float, str]:
    """The time axis in the unit that keeps its numbers small: seconds, minutes, hours or days."""
    for size, name in ((1.0, "s"), (60.0, "min"), (3600.0, "h")):
        if wall_s <= 300 * size:
            return size, name
    return 86400.0, "days"


def _render(report: RunReport, out_png: Path) -> Path:
    plt = pyplot()
    from matplotlib.patches import Patch

    c = report.cost
    attempts = c.attempt_costs
    t0 = min((a.facts.submitted_at for a in attempts), default=0.0)
    size, unit = _unit(c.wall_s)

    def x(t: float) -> float:
        return (t - t0) / size

    fig, (ax_t, ax_r) = plt.subplots(
        2,
        1,
        figsize=(12, 3.2 + 0.45 * max(1, len(attempts)) + 2.6),
        dpi=110,
        sharex=True,
        gridspec_kw={"height_ratios": [1.2 + 0.35 * max(1, len(attempts)), 2.2]},
        constrained_layout=True,
    )
    fig.suptitle(
        f"{report.run.id}: goodput {percent(c.goodput)} of {c.allocated_gpu_hours:.3g} "
        f"{report.gpu_unit}-hours, wall-clock {duration(c.wall_s)}, {len(c.failures)} failure(s)",
        fontsize=12,
        fontweight="bold",
    )
    used: set[str] = set()
    for a in attempts:
        y = a.n
        for s in a.segments:
            used.add(s.phase)
            ax_t.barh(
                y,
                (s.end - s.start) / size,
                left=x(s.start),
                height=0.55,
                color=COLOURS[s.phase],
                edgecolor="white",
                linewidth=0.3,
            )
        labelled = -float("inf")
        for step, at in a.facts.checkpoints:
            xc = x(at)
            ax_t.plot([xc, xc], [y - 0.34, y + 0.34], color="#08306b", linewidth=1.4)
            if xc - labelled < 0.05 * c.wall_s / size:
                continue  # too close to the last label to be read: the tick alone says it
            labelled = xc
            ax_t.annotate(  # the y axis runs downwards: y - 0.34 is the bar's top edge
                f"step_{step}",
                (xc, y - 0.34),
                xytext=(0, 1),
                textcoords="offset points",
                ha="center",
                va="bottom",
                fontsize=7,
                color="#08306b",
            )
        if a.facts.ray_up_at is not None:
            ax_t.plot(x(a.facts.ray_up_at), y, marker="|", markersize=11, color="#084594")
        if a.failure is not None:
            xf = x(a.failure.failed_at)
            ax_t.plot(xf, y, marker="X", markersize=10, color="#b30000", markeredgecolor="white", zorder=5)
            ax_t.annotate(
                a.failure.rule,
                (xf, y + 0.3),
                xytext=(0, -2),
                textcoords="offset points",
                ha="center",
                va="top",
                fontsize=8,
                color="#b30000",
                fontweight="bold",
            )
            for r in (ax_t, ax_r):
                r.axvline(xf, color="#b30000", linewidth=0.8, linestyle="--", alpha=0.6)
    ax_t.set_yticks([a.n for a in attempts])
    ax_t.set_yticklabels([f"attempt {a.n}" for a in attempts])
    ax_t.set_ylim(
        max((a.n for a in attempts), default=1) + 0.8, min((a.n for a in attempts), default=1) - 0.8
    )
    ax_t.grid(True, axis="x", alpha=0.3)
    handles = [Patch(color=COLOURS[p], label=LABELS[p]) for p in PHASES if p in used]
    handles += _marker_handles(plt, attempts)
    ax_t.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False)
    ax_t.set_title(
        "attempts (phase of each second; X = failure, | = Ray up, ticks = checkpoints)", fontsize=9
    )

    plotted = False
    for a in attempts:
        pts = sorted(a.facts.rewards)
        if not pts:
            continue
        plotted = True
        ax_r.plot(
            [x(t) for t, _ in pts],
            [v for _, v in pts],
            marker="o" if len(pts) < 40 else None,
            markersize=3,
            linewidth=1.6,
            label=f"attempt {a.n}",
        )
    if plotted:
        ax_r.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False)
    else:
        ax_r.text(0.5, 0.5, "no reward logged", ha="center", va="center", transform=ax_r.transAxes)
    ax_r.set_ylabel("training reward")
    ax_r.grid(True, alpha=0.3)
    started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t0))
    ax_r.set_xlabel(f"{unit} since the first submission ({started})")

    out_png.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_png.with_name(out_png.name + ".tmp")
    fig.savefig(tmp, format="png")
    plt.close(fig)
    tmp.replace(out_png)
    return out_png


def _marker_handles(plt: Any, attempts: Any) -> list[Any]:
    from matplotlib.lines import Line2D

    out = []
    if any(a.failure is not None for a in attempts):
        out.append(Line2D([], [], marker="X", color="#b30000", linestyle="", markersize=8, label="failure"))
    if any(a.facts.checkpoints for a in attempts):
        out.append(
            Line2D([], [], marker="|", color="#08306b", linestyle="", markersize=10, label="checkpoint")
        )
    return out
