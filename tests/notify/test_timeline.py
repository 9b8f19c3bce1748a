"""The timeline picture: each attempt a bar coloured by phase, the failure marked with its rule, the reward
underneath; a run without failures shows no lost time."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from matplotlib import image as mpimg

from supervisor.domain.runs import RunRow, RunState
from supervisor.notify.timeline import COLOURS, render_timeline
from supervisor.report.costs import cost
from supervisor.report.read import RunReport
from tests.notify.test_plot import colour_fraction
from tests.report.test_costs import demo_shape


def rgb(hex_colour: str) -> np.ndarray:
    return np.array([int(hex_colour[i : i + 2], 16) for i in (1, 3, 5)]) / 255


def columns(img: np.ndarray, hex_colour: str) -> np.ndarray:
    """The x positions where the colour appears."""
    return np.where((np.abs(img[..., :3] - rgb(hex_colour)).max(axis=-1) < 0.06).any(axis=0))[0]


def report(with_failure: bool = True) -> RunReport:
    attempts = demo_shape()
    if not with_failure:
        attempts = attempts[1:]
    spec = json.dumps({"name": "demo", "command": ["true"]})
    run = RunRow("demo-1", "demo", spec, "spec.yaml", RunState.COMPLETED, 0.0, 0.0, None, None, None, False)
    return RunReport(run, cost(attempts, now=1000.0), 8.0, "GPU")


def test_the_picture_shows_productive_and_lost_time_the_failure_and_the_phases_in_order(
    tmp_path: Path,
) -> None:
    out = render_timeline(report(), tmp_path / "sub" / "timeline.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    img = mpimg.imread(out)
    h, w = img.shape[:2]
    assert w > 1000 and h > 500
    bars = img[: h // 2, : int(w * 0.78)]  # the attempts panel, without its legend
    for phase in ("productive", "bring_up", "redone", "resubmit"):
        assert colour_fraction(bars, rgb(COLOURS[phase])) > 0.0005, phase
    assert colour_fraction(bars, rgb("#b30000")) > 0.0002  # the failure's X and its rule's name
    productive, redone = (columns(bars, COLOURS[p]) for p in ("productive", "redone"))
    assert productive.min() < redone.min() < productive.max()  # redone between the two attempts' training
    reward = img[h // 2 :, : int(w * 0.78)]
    assert (reward[..., :3] < 0.9).mean() > 0.01  # a drawn reward curve, not an empty panel


def test_a_run_without_failures_has_no_lost_time_in_its_picture(tmp_path: Path) -> None:
    img = mpimg.imread(render_timeline(report(with_failure=False), tmp_path / "t.png"))
    bars = img[: img.shape[0] // 2, : int(img.shape[1] * 0.78)]
    assert colour_fraction(bars, rgb(COLOURS["productive"])) > 0.001
    for phase in ("redone", "detection", "resubmit"):
        assert colour_fraction(bars, rgb(COLOURS[phase])) == 0.0, phase
