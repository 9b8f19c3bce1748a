"""The Prometheus exporter as the daemon builds it: the endpoint and the textfile both parse with
prometheus-client's own text parser and say what the store holds (runs by state, attempts, failures by rule,
decisions by action, detection latency, the outbox, each active run's step, reward and goodput) and what the
process saw (Slurm commands and their latency, log bytes read); a bad textfile path is refused clearly."""

from __future__ import annotations

import json
import re
import socket
import stat
import time
import urllib.request
from pathlib import Path

import anyio
import pytest
from prometheus_client.parser import text_string_to_metric_families
from pydantic import ValidationError
from structlog.testing import capture_logs

from supervisor.daemon.compose import Built, build
from supervisor.domain.runs import RunState
from supervisor.settings import MetricsSettings, Settings
from tests.cli.test_report import RUN, write_history

REPO = Path(__file__).resolve().parents[2]

LIVE = "live-20261121-000000-beef"


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample by (name, sorted labels), through the real Prometheus text parser."""
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def fake_slurm(tmp_path: Path) -> Path:
    """An squeue that answers at once with no jobs (the exporter counts what the client runs)."""
    bin_dir = tmp_path / "slurm-bin"
    bin_dir.mkdir()
    squeue = bin_dir / "squeue"
    squeue.write_text("#!/bin/sh\nexit 0\n")
    squeue.chmod(squeue.stat().st_mode | stat.S_IXUSR)
    return bin_dir


def daemon_with_history(tmp_path: Path) -> Built:
    settings = Settings(
        root=tmp_path / "root",
        metrics=MetricsSettings(
            port=0, textfile=tmp_path / "textfile" / "shepherd.prom", textfile_interval_s=0.2
        ),
        slurm={"bin_dir": fake_slurm(tmp_path)},
    )
    settings.ensure_dirs()
    write_history(settings.root)  # a completed run: hf-cache-not-shared in attempt 1, detected after 0.5 s
    built = build(settings)
    store = built.store
    store.create_run(LIVE, "live", json.dumps({"name": "live", "command": ["true"]}), "/x")
    store.begin_attempt(LIVE, lambda n: f"l{n}", {})
    store.attempt_submitted(LIVE, 1, "201")
    store.observe_attempt(LIVE, 1, slurm_state="RUNNING", reason=None, nodes="n1", started=True)
    store.set_run_state(LIVE, RunState.RUNNING)
    store.open_mark(LIVE, 1, "training", time.time() - 50)
    store.record_step(LIVE, 1, 7, time.time() - 5, reward=0.25)
    store.db.execute(
        "INSERT INTO slack_outbox (channel, run_id, kind, payload, created_at)"
        " VALUES ('C1', ?, 'post', '{}', ?)",
        (LIVE, time.time() - 30),
    )
    return built


def fetch(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return str(resp.read().decode())


def scrape(built: Built, tmp_path: Path) -> tuple[str, str]:
    """The endpoint's and the textfile's text while the exporter task runs."""
    assert built.metrics is not None
    exporter = built.metrics
    got: dict[str, str] = {}

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(exporter.run)
            await built.slurm.squeue()
            with anyio.fail_after(30):
                while exporter.port is None or not (tmp_path / "textfile" / "shepherd.prom").exists():  # noqa: ASYNC110 - a thread's socket and a file
                    await anyio.sleep(0.05)
            url = f"http://127.0.0.1:{exporter.port}/metrics"
            got["http"] = await anyio.to_thread.run_sync(lambda: fetch(url))
            await anyio.sleep(0.3)  # one more textfile round, after the squeue
            tg.cancel_scope.cancel()

    anyio.run(main)
    return got["http"], (tmp_path / "textfile" / "shepherd.prom").read_text()


def test_the_endpoint_and_the_textfile_say_what_the_store_and_the_process_know(tmp_path: Path) -> None:
    built = daemon_with_history(tmp_path)
    http, textfile = scrape(built, tmp_path)
    for text in (http, textfile):
        s = samples(text)
        assert s[("shepherd_runs", (("state", "COMPLETED"),))] == 1
        assert s[("shepherd_runs", (("state", "RUNNING"),))] == 1
        assert s[("shepherd_runs", (("state", "FAILED"),))] == 0
        assert s[("shepherd_attempts_total", ())] == 3
        assert s[("shepherd_failures_total", (("rule", "hf-cache-not-shared"),))] == 1
        assert s[("shepherd_decisions_total", (("action", "resume"),))] == 1
        assert s[("shepherd_detection_latency_seconds_count", ())] == 1
        assert s[("shepherd_detection_latency_seconds_sum", ())] == pytest.approx(0.5)
        assert s[("shepherd_detection_latency_seconds_bucket", (("le", "1.0"),))] == 1
        assert s[("shepherd_slurm_blind_seconds", ())] == 0
        assert s[("shepherd_slack_outbox_depth", ())] == 1
        assert 29 <= s[("shepherd_slack_outbox_oldest_age_seconds", ())] < 600
        assert s[("shepherd_run_last_step", (("run", LIVE),))] == 7
        assert s[("shepherd_run_last_reward", (("run", LIVE),))] == 0.25
        assert 0 < s[("shepherd_run_goodput", (("run", LIVE),))] <= 1
        assert ("shepherd_run_last_step", (("run", RUN),)) not in s  # finished runs have no per-run series
    s = samples(textfile)
    assert s[("shepherd_slurm_commands_total", (("command", "squeue"), ("outcome", "ok")))] == 1
    assert s[("shepherd_slurm_command_seconds_count", (("command", "squeue"),))] == 1
    built.store.close()


def test_the_grafana_dashboard_graphs_only_what_the_exporter_exports(tmp_path: Path) -> None:
    built = daemon_with_history(tmp_path)
    http, _ = scrape(built, tmp_path)
    exported = {name for name, _labels in samples(http)}
    dashboard = json.loads((REPO / "docs" / "grafana-shepherd.json").read_text())
    exprs = [t["expr"] for panel in dashboard["panels"] for t in panel.get("targets", [])]
    used = {m for e in exprs for m in re.findall(r"shepherd_[a-z_]+", e)}
    assert len(used) >= 12 and used <= exported, used - exported
    built.store.close()


def test_per_run_series_are_bounded_to_the_newest_active_runs(tmp_path: Path) -> None:
    built = daemon_with_history(tmp_path)
    built.settings.metrics.max_run_series = 0
    http, _ = scrape(built, tmp_path)
    assert not [k for k in samples(http) if k[0].startswith("shepherd_run_")]
    built.store.close()


def test_log_bytes_read_by_the_monitor_are_counted(tmp_path: Path) -> None:
    built = daemon_with_history(tmp_path)
    store = built.store
    run, attempt = store.get_run(LIVE), store.get_attempt(LIVE, 1)
    assert run is not None and attempt is not None and built.metrics is not None
    w = built.monitor.watch_for(run, attempt)
    assert w is not None
    out = built.settings.runs_dir / LIVE / "logs" / "slurm-201.out"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("x" * 1000 + "\n")
    built.monitor.read_files(w)
    with out.open("a") as fh:
        fh.write("y" * 99 + "\n")
    built.monitor.read_files(w)
    assert built.metrics.registry.get_sample_value("shepherd_log_bytes_ingested_total") == 1101
    store.close()


def test_the_polling_load_is_exported(tmp_path: Path) -> None:
    built = daemon_with_history(tmp_path)
    assert built.metrics is not None
    built.monitor.changes.force_polling = True
    for i in range(3):
        built.monitor.changes.add(tmp_path / f"ray-worker-{i}.log")
    built.monitor.note_load(1000.0)
    value = built.metrics.registry.get_sample_value
    assert value("shepherd_poll", {"what": "budget_ops_per_s"}) == built.settings.watch.poll_budget_ops_per_s
    assert value("shepherd_poll", {"what": "files"}) == 3
    assert value("shepherd_poll", {"what": "demand_ops_per_s"}) == 1.5  # three new files at the 2 s base
    built.store.close()


def test_a_taken_port_is_logged_and_the_textfile_still_written(tmp_path: Path) -> None:
    built = daemon_with_history(tmp_path)
    assert built.metrics is not None
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        built.settings.metrics.port = taken.getsockname()[1]

        async def main() -> None:
            async with anyio.create_task_group() as tg:
                tg.start_soon(built.metrics.run)  # type: ignore[union-attr]
                with anyio.fail_after(30):
                    while not (tmp_path / "textfile" / "shepherd.prom").exists():  # noqa: ASYNC110 - a file
                        await anyio.sleep(0.05)
                tg.cancel_scope.cancel()

        with capture_logs() as logs:
            anyio.run(main)
    assert built.metrics.port is None
    assert any(e["event"] == "the metrics endpoint could not listen" for e in logs)
    assert (
        samples((tmp_path / "textfile" / "shepherd.prom").read_text())[("shepherd_attempts_total", ())] == 3
    )
    built.store.close()


def test_a_textfile_node_exporter_would_not_read_is_refused_with_the_reason() -> None:
    with pytest.raises(ValidationError, match=r"textfile collector reads only files ending in \.prom"):
        Settings(metrics={"textfile": "/var/lib/node_exporter/shepherd.txt"})


def test_metrics_are_off_unless_asked_for(tmp_path: Path) -> None:
    built = build(Settings(root=tmp_path / "root"))
    assert built.metrics is None and all(t.name != "metrics" for t in built.daemon.tasks)
    built.store.close()
