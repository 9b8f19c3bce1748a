"""The daemon's Prometheus endpoint and node_exporter textfile, scraped while it supervises real Slurm jobs:
a run whose first attempt fails with a real NCCL error and is resumed. Both parse with prometheus-client's
own text parser, during the run and after it."""

from __future__ import annotations

import socket
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.daemon import REPO, DaemonProcess, wait_for
from tests.support.specs import fake_argv, write_spec

pytestmark = pytest.mark.slurm
PLAIN = REPO / "tests" / "support" / "plain.sub"
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def parse(text: str) -> Samples:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def scrape(port: int) -> Samples:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        return parse(resp.read().decode())


def test_metrics_follow_a_real_failure_and_resume(tmp_path: Path, slurm_cluster: Any) -> None:
    port = free_port()
    textfile = tmp_path / "node-exporter" / "shepherd.prom"
    sup = DaemonProcess(
        tmp_path / "root",
        env={
            **slurm_cluster.env,
            "SHEPHERD_LAUNCH_SCRIPT": str(PLAIN),
            "SHEPHERD_METRICS__PORT": str(port),
            "SHEPHERD_METRICS__TEXTFILE": str(textfile),
            "SHEPHERD_METRICS__TEXTFILE_INTERVAL_S": "1",
            "SHEPHERD_METRICS__GOODPUT_REFRESH_S": "1",
        },
    )
    sup.start()
    try:
        spec = write_spec(tmp_path, "m-nccl", fake_argv(tmp_path, "m-nccl", "nccl", "--sleep", "8"))
        run = sup.submit(spec)
        sup.wait_state(run, "RUNNING", timeout=120)

        def running_series() -> Samples | None:
            try:
                s = scrape(port)
            except OSError:
                return None
            return s if ("shepherd_run_goodput", (("run", run),)) in s else None

        live = wait_for(running_series, 60, 0.5, "the run's series while it runs")
        assert live[("shepherd_runs", (("state", "RUNNING"),))] == 1
        assert live[("shepherd_attempts_total", ())] == 1
        assert 0 <= live[("shepherd_run_goodput", (("run", run),))] <= 1
        assert live[("shepherd_slurm_commands_total", (("command", "sbatch"), ("outcome", "ok")))] == 1
        assert live[("shepherd_slurm_command_seconds_count", (("command", "squeue"),))] >= 1

        final = sup.wait_state(run, {"COMPLETED", "FAILED", "GAVE_UP"}, timeout=180)
        assert final["state"] == "COMPLETED" and final["attempts"] == 2

        def settled() -> Samples | None:
            s = parse(textfile.read_text()) if textfile.exists() else {}
            done = s.get(("shepherd_runs", (("state", "COMPLETED"),))) == 1
            return s if done and s.get(("shepherd_attempts_total", ())) == 2 else None

        for s in (wait_for(settled, 30, 0.5, "the textfile after the run"), scrape(port)):
            assert s[("shepherd_runs", (("state", "RUNNING"),))] == 0
            assert s[("shepherd_failures_total", (("rule", "nccl-error"),))] == 1
            assert s[("shepherd_decisions_total", (("action", "resume"),))] == 1
            assert s[("shepherd_detection_latency_seconds_count", ())] == 1
            assert 0 <= s[("shepherd_detection_latency_seconds_sum", ())] < 60
            # The resume restarted in place (the default): attempt 2 ran in the same job, no second sbatch.
            assert s[("shepherd_slurm_commands_total", (("command", "sbatch"), ("outcome", "ok")))] == 1
            assert s[("shepherd_log_bytes_ingested_total", ())] > 100  # the NCCL line and the launcher's
            assert s[("shepherd_slurm_blind_seconds", ())] == 0
            assert not [k for k in s if k[0].startswith("shepherd_run_")]  # a finished run has no series
    finally:
        sup.stop()
