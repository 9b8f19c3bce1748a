"""The daemon's state in Prometheus' format (prometheus-client), so operators can graph and alert on it: an
HTTP endpoint on a localhost port and a textfile for node_exporter's textfile collector (what login nodes
usually run).

What the store knows (runs by state, attempts, failures by rule, decisions by action, detection latency,
each active run's last step, reward and goodput) is read from it at each scrape, on a read-only connection of
the exporter's own, so the numbers survive restarts and have one owner. What only the running process sees
(Slurm commands and their latency, log bytes ingested) are live counters its parts feed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import anyio.to_thread
import structlog
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    start_http_server,
    write_to_textfile,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from supervisor.domain.runs import DecisionRow, RunRow, RunState
from supervisor.notify.slack.notifier import outbox_backlog
from supervisor.report.read import ending_decision, failure_of, run_report
from supervisor.settings import MetricsSettings
from supervisor.store import Store
from supervisor.watch.pollplan import PollLoad

log = structlog.get_logger(__name__)

DETECTION_BUCKETS = (1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1200.0, 1800.0, 3600.0, 7200.0)
SLURM_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class Telemetry:
    """The live counters: the Slurm client and the monitor call these as they work."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.slurm_commands = Counter(
            "shepherd_slurm_commands",
            "Slurm commands run by the daemon, by command and outcome (ok, error, timeout).",
            ["command", "outcome"],
            registry=registry,
        )
        self.slurm_seconds = Histogram(
            "shepherd_slurm_command_seconds",
            "How long each Slurm command took, by command.",
            ["command"],
            buckets=SLURM_BUCKETS,
            registry=registry,
        )
        self.log_bytes = Counter(
            "shepherd_log_bytes_ingested", "Bytes of job log files read by the monitor.", registry=registry
        )

        self.poll = Gauge(
            "shepherd_poll",
            "Polling of shared filesystems: budget and demand (filesystem operations per second), lag "
            "(seconds late), polled paths by kind (files, active_files, progress_files, listings, paused).",
            ["what"],
            registry=registry,
        )

    def poll_load(self, load: PollLoad) -> None:
        """The monitor's polling load, every 10 s; demand above budget means files are looked at late."""
        for what, value in (
            ("budget_ops_per_s", load.budget_ops_per_s),
            ("demand_ops_per_s", load.demand_ops_per_s),
            ("lag_s", load.lag_s),
            ("files", load.files),
            ("active_files", load.active_files),
            ("progress_files", load.progress_files),
            ("listings", load.listings),
            ("paused", load.paused),
        ):
            self.poll.labels(what).set(value)

    def slurm_call(self, command: str, seconds: float, outcome: str) -> None:
        self.slurm_commands.labels(command, outcome).inc()
        self.slurm_seconds.labels(command).observe(seconds)

    def log_bytes_read(self, n: int) -> None:
        if n > 0:
            self.log_bytes.inc(n)


@dataclass
class _Failures:
    """Failures and decisions over all runs, recomputed only when a new decision appeared."""

    last_id: int = -1
    by_rule: dict[str, int] | None = None
    by_action: dict[str, int] | None = None
    latencies: list[float] | None = None


class StoreCollector(Collector):
    """Reads the store at each scrape (one scrape at a time: the connection is the exporter's own)."""

    def __init__(
        self,
        db_path: Path,
        settings: MetricsSettings,
        *,
        blind_since: Callable[[], float | None] = lambda: None,
        accounting_down_since: Callable[[], float | None] = lambda: None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.db_path = db_path
        self.settings = settings
        self.blind_since = blind_since
        self.accounting_down_since = accounting_down_since
        self.clock = clock
        self._lock = threading.Lock()
        self._store: Store | None = None
        self._failures = _Failures()
        self._goodput: dict[str, tuple[float, float | None]] = {}  # run -> (computed at, goodput)

    def store(self) -> Store:
        if self._store is None:
            self._store = Store.open_readonly(self.db_path)
        return self._store

    def close(self) -> None:
        with self._lock:
            if self._store is not None:
                self._store.close()
                self._store = None

    def collect(self) -> Iterable[Metric]:
        with self._lock:
            return list(self._collect())

    def _collect(self) -> Iterator[Metric]:
        store, now = self.store(), self.clock()
        runs = store.list_runs()
        by_state = GaugeMetricFamily("shepherd_runs", "Runs by state.", labels=["state"])
        for state in RunState:
            by_state.add_metric([state.value], sum(1 for r in runs if r.state == state))
        yield by_state
        yield CounterMetricFamily(
            "shepherd_attempts",
            "Attempts submitted (or being submitted) to Slurm.",
            value=store.count_attempts(),
        )
        yield from self._decision_metrics(store)
        blind = self.blind_since()
        yield GaugeMetricFamily(
            "shepherd_slurm_blind_seconds",
            "How long Slurm has not answered (0: it answers); no run is judged while blind.",
            value=now - blind if blind is not None else 0.0,
        )
        down = self.accounting_down_since()
        yield GaugeMetricFamily(
            "shepherd_slurm_accounting_down_seconds",
            "How long sacct (slurmdbd) has failed while squeue answers (0: it answers).",
            value=now - down if down is not None else 0.0,
        )
        depth, oldest = outbox_backlog(store.db)
        yield GaugeMetricFamily(
            "shepherd_slack_outbox_depth", "Slack messages not delivered yet.", value=depth
        )
        yield GaugeMetricFamily(
            "shepherd_slack_outbox_oldest_age_seconds",
            "Age of the oldest Slack message not delivered yet (0: none waiting).",
            value=now - oldest if oldest is not None else 0.0,
        )
        yield from self._run_metrics(store, [r for r in runs if not r.state.is_final], now)

    def _decision_metrics(self, store: Store) -> Iterator[Metric]:
        f = self._failures
        newest = store.db.execute("SELECT COALESCE(MAX(id), 0) FROM decisions").fetchone()[0]
        if newest != f.last_id or f.by_rule is None:
            self._failures = f = _tally(store.acting_decisions(), int(newest))
        assert f.by_rule is not None and f.by_action is not None and f.latencies is not None
        rules = CounterMetricFamily(
            "shepherd_failures", "Attempts ended by a failure, by rule.", labels=["rule"]
        )
        for rule, n in sorted(f.by_rule.items()):
            rules.add_metric([rule], n)
        yield rules
        actions = CounterMetricFamily(
            "shepherd_decisions", "Decisions taken, by action (resume, give_up, alert...).", labels=["action"]
        )
        for action, n in sorted(f.by_action.items()):
            actions.add_metric([action], n)
        yield actions
        buckets = [(str(le), sum(1 for x in f.latencies if x <= le)) for le in DETECTION_BUCKETS]
        buckets.append(("+Inf", len(f.latencies)))
        yield HistogramMetricFamily(
            "shepherd_detection_latency_seconds",
            "From a failure (the line written, the state polled, a stall's last progress) to its decision.",
            buckets=buckets,
            sum_value=sum(f.latencies),
        )

    def _run_metrics(self, store: Store, active: list[RunRow], now: float) -> Iterator[Metric]:
        step = GaugeMetricFamily("shepherd_run_last_step", "Last training step reached.", labels=["run"])
        reward = GaugeMetricFamily(
            "shepherd_run_last_reward", "Newest training reward logged.", labels=["run"]
        )
        goodput = GaugeMetricFamily(
            "shepherd_run_goodput", "Productive / allocated GPU-hours so far.", labels=["run"]
        )
        runs = sorted(active, key=lambda r: r.updated_at, reverse=True)[: self.settings.max_run_series]
        for run in runs:
            rid = run.id
            last = store.latest_step(rid)
            if last is not None:
                step.add_metric([rid], last.step)
                if last.reward is not None:
                    reward.add_metric([rid], last.reward)
            g = self._run_goodput(store, run, now)
            if g is not None:
                goodput.add_metric([rid], g)
        shown = {r.id for r in runs}
        self._goodput = {k: v for k, v in self._goodput.items() if k in shown}
        yield from (step, reward, goodput)

    def _run_goodput(self, store: Store, run: RunRow, now: float) -> float | None:
        rid = run.id
        cached = self._goodput.get(rid)
        if cached is not None and now - cached[0] < self.settings.goodput_refresh_s:
            return cached[1]
        value = run_report(store, run, now).cost.goodput
        self._goodput[rid] = (now, value)
        return value


def _tally(decisions: list[DecisionRow], newest: int) -> _Failures:
    by_action: dict[str, int] = {}
    for d in decisions:
        if d.outcome.startswith("ignored"):
            continue
        for action in d.action.split(","):
            by_action[action] = by_action.get(action, 0) + 1
    by_rule: dict[str, int] = {}
    latencies: list[float] = []
    keys = {(d.run_id, d.attempt) for d in decisions if d.attempt is not None}
    by_run: dict[str, list[DecisionRow]] = {}
    for d in decisions:
        by_run.setdefault(d.run_id, []).append(d)
    for run_id, n in sorted(keys, key=lambda k: (k[0], k[1] or 0)):
        end = ending_decision(by_run[run_id], n or 0)
        if end is None:
            continue
        failure = failure_of(end)
        by_rule[failure.rule] = by_rule.get(failure.rule, 0) + 1
        latencies.append(failure.detected_at - failure.failed_at)
    return _Failures(newest, by_rule, by_action, latencies)


class MetricsExporter:
    """The endpoint and the textfile over one registry; `run` is a daemon task."""

    def __init__(self, settings: MetricsSettings, collector: StoreCollector) -> None:
        self.settings = settings
        self.registry = CollectorRegistry()
        self.telemetry = Telemetry(self.registry)
        self.collector = collector
        self.registry.register(collector)
        self.port: int | None = None  # the endpoint's port once it listens

    def write_textfile(self) -> None:
        path = self.settings.textfile
        if path is None:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        write_to_textfile(str(path), self.registry)  # a temporary file renamed over it: never half-read

    async def run(self) -> None:
        s = self.settings
        server = None
        if s.port is not None:
            try:
                server, _thread = start_http_server(s.port, addr=s.host, registry=self.registry)
            except OSError as exc:  # the port is taken, the address is not ours: say so, keep supervising
                log.error("the metrics endpoint could not listen", host=s.host, port=s.port, error=str(exc))
            else:
                self.port = int(server.server_address[1])
                log.info("metrics endpoint listening", address=f"http://{s.host}:{self.port}/metrics")
        try:
            while True:
                if s.textfile is not None:
                    try:
                        await anyio.to_thread.run_sync(self.write_textfile)
                    except Exception as exc:  # a full disk or a bad folder: say so, keep supervising
                        log.error(
                            "could not write the metrics textfile", path=str(s.textfile), error=str(exc)
                        )
                await anyio.sleep(s.textfile_interval_s)
        finally:
            if server is not None:
                server.shutdown()
                server.server_close()
            self.collector.close()
