"""`shepherd plot RUN -o FILE`: the run's reward and validation curves, drawn the way Slack gets them."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import anyio

from supervisor.act.control import plot_run
from supervisor.cli.common import EXIT_ERROR, AddCommand, open_store, settings_of
from supervisor.ports import ControlError


def register(add: AddCommand) -> None:
    plot = add("plot", cmd_plot, "draw a run's reward and validation curves to a PNG")
    plot.add_argument("run")
    plot.add_argument("-o", "--output", required=True)


def cmd_plot(args: argparse.Namespace) -> int:
    """The same drawing that Slack's `/shepherd plot` uses, to a file instead of a thread."""
    settings = settings_of(args)
    store = open_store(settings)
    try:
        _run, out = anyio.run(plot_run, store, settings.runs_dir, args.run, Path(args.output))
    except ControlError as exc:
        print(f"shepherd: {exc}", file=sys.stderr)
        return EXIT_ERROR
    print(out)
    return 0
