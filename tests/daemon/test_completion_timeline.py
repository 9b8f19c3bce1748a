"""A run that completes posts its timeline picture into its thread, beside its curves, with its goodput in
the title."""

from __future__ import annotations

from pathlib import Path

import anyio

from supervisor.daemon.compose import build
from supervisor.domain.jobstate import JobState
from supervisor.domain.notices import Notice
from supervisor.domain.runs import RunState
from supervisor.settings import Settings
from tests.cli.test_report import RUN, write_history


class Recorder:
    def __init__(self) -> None:
        self.plots: list[tuple[str, str, str]] = []

    def publish(self, notice: Notice) -> None:
        pass

    def publish_plot(self, run_id: str, png: str, title: str) -> None:
        self.plots.append((run_id, png, title))


def test_completion_posts_the_timeline_with_the_goodput_in_its_title(tmp_path: Path) -> None:
    settings = Settings(root=tmp_path / "root")
    settings.ensure_dirs()
    write_history(settings.root)
    rec = Recorder()
    built = build(settings, sinks=[rec])
    store = built.store
    store.set_run_state(RUN, RunState.RUNNING)  # the end is being handled now
    run, last = store.get_run(RUN), store.get_attempt(RUN, 2)
    assert run is not None and last is not None
    anyio.run(built.actions.on_unmatched_end, run, last, JobState.COMPLETED, 0)
    ((run_id, png, title),) = [p for p in rec.plots if p[1].endswith("timeline.png")]
    assert run_id == RUN and Path(png) == settings.runs_dir / RUN / "timeline.png"
    assert Path(png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert title.startswith("toy: timeline (goodput 62.8%") and "hf-cache-not-shared x1" in title
    store.close()
