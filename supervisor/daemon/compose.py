"""`shepherd daemon`: build the parts from settings and run them until SIGTERM."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

import anyio
import structlog

from supervisor.act.actions import Actions, resolve_checkpoint_for_run
from supervisor.act.control import Controller, DaemonRunControl
from supervisor.daemon.loops import DAEMON_THREAD, Daemon
from supervisor.daemon.monitor import Monitor
from supervisor.domain.notices import RunEvent
from supervisor.domain.spec import JobSpec, NotifySpec
from supervisor.notify.sinks import FanOut, LogSink
from supervisor.notify.slack.service import SlackService, build_slack
from supervisor.notify.slack.sink import SlackSink
from supervisor.ports import EventSink
from supervisor.rules.loader import REPO_RULES
from supervisor.service.reload import Reloader
from supervisor.settings import Settings
from supervisor.slurm.client import SlurmClient
from supervisor.store import Store

log = structlog.get_logger(__name__)


def configure(log_format: str) -> None:
    from supervisor.logs import configure_logging

    configure_logging(log_format)  # type: ignore[arg-type]


class Built:
    """The daemon and the parts around it, for `run_daemon`, tests and benchmarks."""

    def __init__(self, daemon: Daemon, monitor: Monitor, slack: SlackService | None) -> None:
        self.daemon = daemon
        self.monitor = monitor
        self.slack = slack

    @property
    def tasks(self) -> list[Callable[[], Coroutine[Any, Any, None]]]:
        tasks: list[Callable[[], Coroutine[Any, Any, None]]] = [self.monitor.run]
        if self.slack is not None:
            tasks.append(self.slack.run)
        return tasks

    async def run(self) -> None:
        reloader = Reloader(
            [("rules", self.monitor.reload_rules), ("settings", self.reload_settings)],
            alert=self._alert,
            notifier=self.daemon.sd,
        )

        async def watch_rules() -> None:
            """A changed rules file reloads like SIGHUP; a bad one keeps the old rules and alerts."""
            import watchfiles

            dirs = [d for d in {REPO_RULES, *self.daemon.settings.rules_dirs} if d.is_dir()]
            if not dirs:
                return
            async for _ in watchfiles.awatch(*dirs, debounce=300, recursive=False):
                await reloader.reload_now("rules file changed")

        await self.daemon.run(extra_tasks=[*self.tasks, reloader.run, watch_rules])

    def reload_settings(self) -> None:
        """Re-read shepherd.toml and SHEPHERD_* env; what can change live is applied, the rest at restart.

        Live: Slurm cadences, timeouts and grace periods, the log polling interval, rules folders.
        A file that does not validate raises before anything is swapped, so the old settings stay.
        """
        from supervisor.settings import load_settings

        current = self.daemon.settings
        fresh = load_settings(current.root)
        current.slurm = fresh.slurm
        current.watch = fresh.watch
        current.rules_dirs = fresh.rules_dirs
        self.daemon.slurm.timeout_s = fresh.slurm.command_timeout_s
        self.monitor.changes.poll_interval_s = fresh.watch.poll_interval_s
        if fresh.slack != current.slack:
            log.warning("slack settings changed: they take effect at the next restart")

    def _alert(self, text: str) -> None:
        self.daemon.sink.publish(
            RunEvent(DAEMON_THREAD, "alert", text, level="error", fields={"name": "shepherd daemon"})
        )


def build(settings: Settings, extra_sinks: list[EventSink] | None = None) -> Built:
    settings.ensure_dirs()
    store = Store(settings.db_path)
    slurm = SlurmClient(timeout_s=settings.slurm.command_timeout_s, bin_dir=settings.slurm.bin_dir)
    daemon = Daemon(settings, store, slurm)
    controller = Controller(
        store, slurm, resolve_checkpoint=resolve_checkpoint_for_run, on_change=daemon.wake
    )
    run_control = DaemonRunControl(controller, settings)

    def run_state(run_id: str) -> str | None:
        run = store.get_run(run_id)
        return run.state.value if run else None

    slack = build_slack(store.db, settings.slack, run_control, run_state=run_state)
    sinks: list[EventSink] = [LogSink(), *(extra_sinks or [])]
    if slack is not None:

        def notify_of(run_id: str) -> NotifySpec | None:
            run = store.get_run(run_id)
            return JobSpec.model_validate_json(run.spec_json).notify if run else None

        def channel_for(run_id: str) -> str | None:
            notify = notify_of(run_id)
            return notify.slack_channel if notify else None

        def level_for(run_id: str) -> str | None:
            # A spec's notify.level overrides slack.level for its run; "info" is the spec's default, so it
            # leaves the operator's slack.level in force.
            notify = notify_of(run_id)
            return notify.level if notify and notify.level != "info" else None

        sinks.append(SlackSink(slack.notifier, channel_for, level_for))
    sink = FanOut(sinks)
    daemon.sink = sink
    run_control.sink = sink  # `/shepherd plot` posts the way the completion plot does
    actions = Actions(daemon, sink)
    monitor = Monitor(daemon, actions)
    daemon.state_handlers.append(monitor.on_state)
    daemon.loop_allowance["monitor"] = 60.0
    daemon.actions = actions
    return Built(daemon, monitor, slack)


def build_daemon(settings: Settings, sinks: list[EventSink] | None = None) -> tuple[Daemon, Monitor]:
    built = build(settings, sinks)
    return built.daemon, built.monitor


def run_daemon(settings: Settings, *, log_format: str = "auto") -> int:
    configure(log_format)
    built = build(settings)
    try:
        anyio.run(built.run)
    finally:
        built.daemon.store.close()
    log.info("daemon stopped")
    return 0
