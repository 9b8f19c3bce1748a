"""The run's picture: training reward and validation curves vs step, for Slack and `shepherd plot`.

People judge a GRPO run by two shapes: is the reward climbing, and does validation
follow. A reward panel and a validation panel side by side, one step axis each; validation
metrics of different scales (accuracy 0-1, a mean response length ~110) get a panel each, or
the small one would be drawn as a flat line; when a rule fired on another metric (a NaN loss,
a KL blow-up), one more panel shows that curve.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from supervisor.watch.metric_names import TRAIN_REWARD, TRAIN_REWARD_STD

_PYPLOT = threading.Lock()  # pyplot keeps a global figure registry: one drawing at a time


def pyplot_lock() -> threading.Lock:
    """Held while drawing: every picture of the daemon (curves, timeline) draws one at a time."""
    return _PYPLOT


def _series(points: Sequence[tuple[str, int, float]]) -> dict[str, list[tuple[int, float]]]:
    """Per tag, (step, value) sorted by step; the last value wins for a repeated step (a resumed run)."""
    by_tag: dict[str, dict[int, float]] = {}
    for tag, step, value in points:
        if value is None or not math.isfinite(float(value)):
            continue
        by_tag.setdefault(tag, {})[int(step)] = float(value)
    return {tag: sorted(steps.items()) for tag, steps in by_tag.items()}


def _reward_tag(series: dict[str, list[tuple[int, float]]]) -> str | None:
    """Shepherd's reward first, then any other training scalar that looks like a mean reward."""
    if TRAIN_REWARD in series:
        return TRAIN_REWARD
    for tag in sorted(series):
        if "reward" in tag and "std" not in tag and tag.startswith("train"):
            return tag
    return None


# Two metrics share an axis while their magnitudes are within this factor of each other.
SAME_SCALE_FACTOR = 10.0


def scale_groups(series: dict[str, list[tuple[int, float]]], tags: Sequence[str]) -> list[list[str]]:
    """`tags` grouped by scale, each group drawn on its own axis: a tag joins the group of the smallest
    magnitude (largest |value|) it is within SAME_SCALE_FACTOR of, smallest magnitudes first."""

    def magnitude(tag: str) -> float:
        return max((abs(v) for _, v in series.get(tag, [])), default=0.0)

    groups: list[tuple[float, list[str]]] = []
    for tag in sorted(tags, key=lambda t: (magnitude(t), t)):
        m = magnitude(tag)
        if groups and m <= max(groups[-1][0], 1e-12) * SAME_SCALE_FACTOR and (m > 0) == (groups[-1][0] > 0):
            groups[-1][1].append(tag)
        else:
            groups.append((m, [tag]))
    return [sorted(g) for _, g in groups]


def render_curves(
    points: Sequence[tuple[str, int, float]], out_png: Path, title: str, focus: str | None = None
) -> Path:
    """Write a PNG (panels: training reward, validation metrics one panel per scale, and `focus` if given)
    and return its path.

    NaN and inf values of the focus metric are marked on the step axis (they cannot be drawn as a value).
    Thread-safe."""
    with _PYPLOT:
        plt = pyplot()
        fig = curves_figure(points, title, focus)
        try:
            return _save(fig, Path(out_png))
        finally:
            plt.close(fig)


def pyplot() -> Any:
    """matplotlib, imported on the first drawing: it is heavy, and most commands never draw."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def curves_figure(points: Sequence[tuple[str, int, float]], title: str, focus: str | None = None) -> Any:
    """The picture as a matplotlib Figure (the caller closes it; hold pyplot_lock() while drawing)."""
    plt = pyplot()
    series = _series(points)
    reward_tag = _reward_tag(series)
    std_tag = TRAIN_REWARD_STD if TRAIN_REWARD_STD in series else None
    val_groups = scale_groups(series, [t for t in series if t.startswith("val:")]) or [[]]

    show_focus = focus is not None and focus != reward_tag
    panels = 1 + len(val_groups) + (1 if show_focus else 0)
    cols = panels if panels <= 3 else math.ceil(panels / 2)
    rows = math.ceil(panels / cols)
    fig, grid = plt.subplots(
        rows, cols, figsize=(6 * cols, 4.6 * rows), dpi=110, constrained_layout=True, squeeze=False
    )
    axes = list(grid.flat)
    for spare in axes[panels:]:
        spare.set_visible(False)
    ax_r = axes[0]
    if show_focus and focus is not None:
        _focus_panel(
            axes[panels - 1],
            focus,
            series.get(focus, []),
            [s for t, s, v in points if t == focus and not math.isfinite(float(v))],
        )
    fig.suptitle(title, fontsize=13, fontweight="bold")

    if reward_tag:
        steps = [s for s, _ in series[reward_tag]]
        vals = [v for _, v in series[reward_tag]]
        ax_r.plot(steps, vals, color="#1f77b4", linewidth=1.8, label=reward_tag)
        if std_tag:
            std = dict(series[std_tag])
            band = [(s, v, std[s]) for s, v in series[reward_tag] if s in std]
            if band:
                ax_r.fill_between(
                    [b[0] for b in band],
                    [b[1] - b[2] for b in band],
                    [b[1] + b[2] for b in band],
                    color="#1f77b4",
                    alpha=0.15,
                    label="± std",
                )
        ax_r.annotate(
            f"{vals[-1]:.3g} @ {steps[-1]}",
            xy=(steps[-1], vals[-1]),
            xytext=(-6, 8),
            textcoords="offset points",
            ha="right",
            fontsize=9,
            bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": "#999999", "alpha": 0.9},
        )
        ax_r.legend(loc="best", fontsize=9)
    else:
        ax_r.text(0.5, 0.5, "no reward metrics yet", ha="center", va="center", transform=ax_r.transAxes)
    ax_r.set_title("Training reward (mean)")
    ax_r.set_xlabel("step")
    ax_r.set_ylabel("reward")
    ax_r.grid(True, alpha=0.3)

    colours = iter(plt.rcParams["axes.prop_cycle"].by_key()["color"] * 4)
    for i, tags in enumerate(val_groups):
        _validation_panel(axes[1 + i], series, tags, colours, named=len(val_groups) > 1)
    return fig


def _validation_panel(
    ax: Any, series: dict[str, list[tuple[int, float]]], tags: list[str], colours: Any, *, named: bool
) -> None:
    """Validation metrics of one scale (`named`: the panel's title names them, one of several panels); each
    metric keeps its own colour across panels."""
    if tags:
        for tag in tags:
            steps = [s for s, _ in series[tag]]
            vals = [v for _, v in series[tag]]
            ax.plot(steps, vals, marker="o", markersize=3.5, linewidth=1.6, label=tag, color=next(colours))
        ax.legend(loc="best", fontsize=9)
    else:
        ax.text(0.5, 0.5, "no validation yet", ha="center", va="center", transform=ax.transAxes)
    ax.set_title("Validation" + (f": {', '.join(t.removeprefix('val:') for t in tags)}" if named else ""))
    ax.set_xlabel("step")
    ax.set_ylabel(tags[0] if len(tags) == 1 else "value")
    ax.grid(True, alpha=0.3)


def _save(fig: Any, out_png: Path) -> Path:
    out_png.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_png.with_name(out_png.name + ".tmp")
    fig.savefig(tmp, format="png")
    tmp.replace(out_png)
    return out_png


def _focus_panel(ax: Any, tag: str, values: list[tuple[int, float]], bad_steps: list[int]) -> None:
    """The metric a rule fired on; its NaN/inf steps as red marks on the axis."""
    if values:
        ax.plot([s for s, _ in values], [v for _, v in values], color="#d62728", linewidth=1.6, label=tag)
    for i, step in enumerate(sorted(set(bad_steps))):
        ax.axvline(step, color="#d62728", alpha=0.35, linestyle="--", label="NaN/inf" if i == 0 else None)
    if not values and not bad_steps:
        ax.text(0.5, 0.5, f"no {tag} values", ha="center", va="center", transform=ax.transAxes)
    else:
        ax.legend(loc="best", fontsize=9)
    ax.set_title(tag)
    ax.set_xlabel("step")
    ax.grid(True, alpha=0.3)
