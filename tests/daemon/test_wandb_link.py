"""The run's W&B page, named by wandb's `View run` line in the job's logs, is recorded with the run once,
announced once (Slack puts it in the thread's first message), and shown by `shepherd status RUN`."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from supervisor.act.control import Controller, DaemonRunControl
from supervisor.cli.main import main
from supervisor.daemon.compose import build
from supervisor.daemon.monitor import Monitor
from supervisor.settings import Settings
from tests.support.sinks import RecordingSink

RUN = "toy-20260101-000000-abcd"
URL = "https://wandb.ai/team/grpo-math/runs/mey3t37m"


def test_the_wandb_link_is_recorded_announced_once_and_shown_by_status(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sink = RecordingSink()
    settings = Settings(root=tmp_path / "root")
    built = build(settings, sinks=[sink])
    store = built.store
    store.create_run(RUN, "toy", json.dumps({"name": "toy", "command": ["true"]}), "spec.yaml")
    store.begin_attempt(RUN, lambda n: f"t{n}", {})
    store.attempt_submitted(RUN, 1, "4242")
    run, attempt = store.get_run(RUN), store.get_attempt(RUN, 1)
    assert run is not None and attempt is not None
    monitor = Monitor(store, built.settings, built.actions, built.heartbeats)
    w = monitor.watch_for(run, attempt)
    assert w is not None
    out = w.output_file()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(f"wandb: Syncing run gentle-sun-3\nwandb: 🚀 View run gentle-sun-3 at: {URL}\n")
    monitor.read_files(w, {str(out)})
    anyio.run(monitor.dispatch, w, [])
    with out.open("a") as fh:  # wandb names the page again at the end of the run
        fh.write(f"wandb: 🚀 View run gentle-sun-3 at: {URL}\n")
    monitor.read_files(w, {str(out)})
    anyio.run(monitor.dispatch, w, [])
    assert store.wandb_url(RUN) == URL
    assert [e.message for e in store.events(RUN) if e.kind == "wandb"] == [f"W&B run: {URL}"]
    assert [(n.kind, n.fields) for n in sink.notices if n.kind == "wandb"] == [("wandb", {"url": URL})]
    slack = DaemonRunControl(Controller(store, slurm=None), settings, sink=None)  # type: ignore[arg-type]
    assert f"W&B {URL}" in anyio.run(slack.status, RUN)  # Slack's /shepherd status RUN
    store.close()
    assert main(["--root", str(tmp_path / "root"), "status", RUN]) == 0
    assert f"W&B       {URL}" in capsys.readouterr().out
