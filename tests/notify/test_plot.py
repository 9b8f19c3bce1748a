"""The reward/validation picture: two panels with real curves, and it reaches the run's thread."""

from __future__ import annotations

import math
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from matplotlib import image as mpimg
from slack_sdk.web.async_client import AsyncWebClient

from supervisor.notify.plot import _series, curves_figure, pyplot, pyplot_lock, render_curves, scale_groups
from supervisor.notify.slack.notifier import Notifier, OutboxSender
from supervisor.notify.slack.transport import WebApiTransport
from supervisor.testing.slack_standin import SlackStandin
from tests.notify.conftest import BOT, make_settings

REWARD_BLUE = np.array([0x1F, 0x77, 0xB4]) / 255


def run_points(steps: int = 200) -> list[tuple[str, int, float]]:
    pts: list[tuple[str, int, float]] = []
    for s in range(steps):
        pts.append(("train:reward", s, 0.2 + 0.6 * (1 - math.exp(-s / 60))))
        pts.append(("train/reward_std", s, 0.2))
        pts.append(("timing/train/total_step_time", s, 3.0))
    for s in range(0, steps, 20):
        pts.append(("val:accuracy", s, 0.1 + 0.5 * s / steps))
    pts.append(("train:reward", 50, float("nan")))  # a NaN must not break the picture
    return pts


def colour_fraction(img: np.ndarray, rgb: np.ndarray, tol: float = 0.06) -> float:
    return float((np.abs(img[..., :3] - rgb).max(axis=-1) < tol).mean())


def test_png_has_a_reward_curve_on_the_left_and_validation_on_the_right(tmp_path: Path) -> None:
    out = render_curves(run_points(), tmp_path / "sub" / "curves.png", "gsm8k-a")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    img = mpimg.imread(out)
    h, w = img.shape[:2]
    assert w > 1000 and h > 400  # readable in Slack's preview
    left, right = img[:, : w // 2], img[:, w // 2 :]
    assert colour_fraction(left, REWARD_BLUE) > 0.003  # the reward line is drawn
    assert colour_fraction(right, REWARD_BLUE) > 0.001  # val:accuracy, first colour of the cycle
    assert (right[..., :3] < 0.9).mean() > 0.01  # axes, labels and a curve, not an empty panel


def test_missing_metrics_give_a_labelled_empty_panel_not_an_error(tmp_path: Path) -> None:
    out = render_curves([("train:reward", 1, 0.5)], tmp_path / "c.png", "early")
    assert out.exists()
    out = render_curves([], tmp_path / "d.png", "nothing yet")
    assert out.exists()


def test_a_resumed_run_keeps_the_latest_value_per_step() -> None:
    series = _series([("val:accuracy", 100, 0.3), ("val:accuracy", 50, 0.2), ("val:accuracy", 100, 0.35)])
    assert series["val:accuracy"] == [(50, 0.2), (100, 0.35)]


@pytest.mark.anyio
async def test_rendered_plot_is_uploaded_into_the_thread_byte_for_byte(
    db: sqlite3.Connection, standin: SlackStandin, tmp_path: Path
) -> None:
    settings = make_settings(standin)
    notifier = Notifier(db, settings)
    sender = OutboxSender(
        db,
        WebApiTransport(AsyncWebClient(token=BOT, base_url=standin.api_url, retry_handlers=[])),
        settings,
        notifier=notifier,
    )
    png = render_curves(run_points(), tmp_path / "curves.png", "gsm8k-a")
    notifier.run_opened("a-1", "gsm8k-a", "", None)
    notifier.event("a-1", "completed", "Completed at step 200")
    notifier.upload_plot("a-1", png, "gsm8k-a: reward and validation")
    await sender.drain()
    (upload,) = standin.rec.uploads.values()
    assert upload["data"] == png.read_bytes() and upload["filename"] == "curves.png"
    assert standin.rec.completed_uploads[0]["thread_ts"] == standin.top_level()[0]["ts"]


FOCUS_RED = np.array([0xD6, 0x27, 0x28]) / 255


def test_the_metric_a_rule_fired_on_gets_a_third_panel_with_its_nan_steps_marked(tmp_path: Path) -> None:
    pts = run_points()
    pts += [("train:loss", s, 0.5 - s / 1000) for s in range(120)]
    pts += [("train:loss", s, float("nan")) for s in range(120, 130)]
    out = render_curves(pts, tmp_path / "c.png", "nan-run", focus="train:loss")
    img = mpimg.imread(out)
    w = img.shape[1]
    third = img[:, 2 * w // 3 :]
    assert w > 1500  # three panels
    assert colour_fraction(third, FOCUS_RED) > 0.002  # the curve and the NaN marks
    assert colour_fraction(img[:, : 2 * w // 3], FOCUS_RED) < 0.0005  # only in its own panel


def lines_by_label(fig: Any) -> dict[str, Any]:
    """Each drawn curve's axes, by its legend label."""
    return {ln.get_label(): ax for ax in fig.axes if ax.get_visible() for ln in ax.get_lines()}


def test_validation_metrics_of_different_scales_get_an_axis_each() -> None:
    """Accuracy (0-1) drawn beside a mean length (~110) on one axis is a flat line: each gets its own."""
    pts = run_points()
    pts += [("val:avg_length", s, 105.0 + s / 20) for s in range(0, 200, 20)]
    pts += [("val:reward_mean", s, 0.3 + s / 1000) for s in range(0, 200, 20)]
    with pyplot_lock():
        fig = curves_figure(pts, "two scales")
        try:
            axis = lines_by_label(fig)
            assert axis["val:accuracy"] is not axis["val:avg_length"]
            assert axis["val:accuracy"] is axis["val:reward_mean"]  # one scale: one axis
            assert axis["train:reward"] not in (axis["val:accuracy"], axis["val:avg_length"])
            low, high = axis["val:accuracy"].get_ylim()
            assert -0.1 < low and high < 1.1  # accuracy fills its axis
            low, high = axis["val:avg_length"].get_ylim()
            assert 100 < low and high < 120
            assert len([ax for ax in fig.axes if ax.get_visible()]) == 3
        finally:
            pyplot().close(fig)


def test_scale_groups_split_at_an_order_of_magnitude() -> None:
    series = {"a": [(1, 0.8)], "b": [(1, 0.3)], "c": [(1, 110.0)], "d": [(1, 40.0)], "z": [(1, 0.0)]}
    assert scale_groups(series, ["a", "b", "c", "d", "z"]) == [["z"], ["a", "b"], ["c", "d"]]
