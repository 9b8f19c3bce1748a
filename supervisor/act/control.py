"""Human actions on runs: one code path for the CLI and for Slack.

The CLI runs in its own process: it changes the store (which the daemon reads
every loop) and calls Slurm directly. Every action is recorded as an event
with who asked for it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import anyio.to_thread

from supervisor.act.curves import run_points
from supervisor.decide.staging import trainer_dir
from supervisor.domain.overrides import AttemptOverrides
from supervisor.domain.runs import RunRow, RunState
from supervisor.notify.plot import render_curves
from supervisor.notify.silences import RULE_PREFIX
from supervisor.notify.timeline import render_timeline
from supervisor.ports import CheckpointResolver, ControlError, NoticeSink, SlurmControl
from supervisor.report.read import RunReport, run_report
from supervisor.report.text import slack_summary, timeline_title
from supervisor.settings import Settings
from supervisor.store import Store


def no_checkpoints(
    run: RunRow, selector: str, *, attempt: int = 0, lineage: str | None = None
) -> tuple[str | None, str]:
    return None, "no checkpoint configured"


def _trainer_dir(run: RunRow, path: str | None) -> str | None:
    """The staged dir `path` lies in, if any: the next attempt must point the trainer there."""
    ck = run.spec.checkpoint
    return trainer_dir(ck.dir, path) if ck is not None else None


def find_run(store: Store, ref: str) -> RunRow:
    """The run `ref` names: its id, its name (the newest run of that name) or a unique id prefix."""
    runs = store.find_runs(ref)
    if not runs:
        raise ControlError(f"no run called {ref!r} (try `shepherd status`)")
    if len(runs) > 1 and runs[0].name == ref:
        return runs[0]  # a name: the newest run of that name
    if len(runs) > 1:
        raise ControlError(f"{ref!r} matches {len(runs)} runs: " + ", ".join(r.id for r in runs[:5]))
    return runs[0]


async def plot_run(store: Store, runs_dir: Path, ref: str, out_png: Path) -> tuple[RunRow, Path]:
    """The run's reward and validation curves as a PNG at `out_png` (`shepherd plot`, Slack's plot).

    The store is read here, in the caller's thread; only the drawing runs in a worker thread.
    """
    run = find_run(store, ref)
    points = run_points(store, runs_dir, run)
    if not points:
        raise ControlError(f"{run.id} has no metrics yet, so there is nothing to plot")
    png = await anyio.to_thread.run_sync(render_curves, points, out_png, run.id)
    return run, png


async def report_run(store: Store, ref: str, out_png: Path, now: float) -> tuple[RunReport, Path]:
    """The run's cost as the store knows it at `now`, and its timeline as a PNG at `out_png` (Slack's
    `/shepherd report`, the completion post). The store is read here; only the drawing runs in a thread."""
    rep = run_report(store, find_run(store, ref), now)
    png = await anyio.to_thread.run_sync(render_timeline, rep, out_png)
    return rep, png


class Controller:
    """Cancel, hold, release, resume and give up, for a person: the CLI's and Slack's one code path."""

    def __init__(
        self,
        store: Store,
        slurm: SlurmControl,
        *,
        resolve_checkpoint: CheckpointResolver = no_checkpoints,
        clock: Callable[[], float] = time.time,
        on_change: Callable[[], None] | None = None,
    ) -> None:
        self.store = store
        self.slurm = slurm
        self.resolve_checkpoint = resolve_checkpoint
        self.clock = clock
        self.on_change = on_change or (lambda: None)

    def find(self, ref: str) -> RunRow:
        return find_run(self.store, ref)

    def _live_job(self, run: RunRow) -> str | None:
        a = self.store.latest_attempt(run.id)
        return a.live_job if a is not None else None

    async def cancel(self, ref: str, actor: str) -> str:
        run = self.find(ref)
        if run.state.is_final:
            raise ControlError(f"{run.id} is already {run.state.value}; nothing to cancel")
        job = self._live_job(run)
        self.store.set_run_state(
            run.id,
            RunState.CANCELLED,
            reason=f"cancelled by {actor}",
            event=("cancelled", f"cancelled by {actor}", {"actor": actor, "job_id": job}),
        )
        if job:
            await self.slurm.cancel(job)
        self.on_change()
        return f"cancelled {run.id}" + (f" (scancel {job})" if job else "")

    async def hold(self, ref: str, actor: str) -> str:
        run = self.find(ref)
        if run.state.is_final:
            raise ControlError(f"{run.id} is {run.state.value}; there is nothing to hold")
        if run.held:
            raise ControlError(f"{run.id} is already held")
        if run.state == RunState.RUNNING:
            raise ControlError(
                f"{run.id} is already running; `hold` keeps pending jobs and resumes from starting"
            )
        job = self._live_job(run)
        if job:
            await self.slurm.hold(job)
        self.store.set_run_state(
            run.id,
            RunState.HELD if job else run.state,
            held=True,
            next_action_at=run.next_action_at,
            event=("held", f"held by {actor}", {"actor": actor, "job_id": job}),
        )
        self.on_change()
        return f"held {run.id}" + (f" (job {job})" if job else " (its next submission waits)")

    async def release(self, ref: str, actor: str) -> str:
        run = self.find(ref)
        if not run.held:
            raise ControlError(f"{run.id} is not held")
        job = self._live_job(run)
        if job:
            await self.slurm.release(job)
        state = RunState.PENDING if run.state == RunState.HELD else run.state
        self.store.set_run_state(
            run.id,
            state,
            held=False,
            next_action_at=run.next_action_at,
            event=("released", f"released by {actor}", {"actor": actor, "job_id": job}),
        )
        self.on_change()
        return f"released {run.id}"

    async def resume(self, ref: str, checkpoint: str, actor: str) -> str:
        run = self.find(ref)
        if run.state in (RunState.PENDING, RunState.RUNNING, RunState.SUBMITTING, RunState.QUEUED):
            raise ControlError(f"{run.id} is {run.state.value}; cancel it first or wait for it to end")
        if run.state == RunState.COMPLETED:
            raise ControlError(f"{run.id} completed; submit a new run to train further")
        last = self.store.latest_attempt(run.id)
        lineage = AttemptOverrides.from_dict(last.overrides).checkpoint_dir if last else None
        path, note = self.resolve_checkpoint(
            run, checkpoint, attempt=(last.n if last else 0) + 1, lineage=lineage
        )
        overrides = AttemptOverrides.from_dict(run.next_attempt)
        overrides = AttemptOverrides(
            checkpoint=path,
            checkpoint_dir=_trainer_dir(run, path),
            env=overrides.env,
            sbatch_args=overrides.sbatch_args,
            exclude=overrides.exclude,
            reason=f"resumed by {actor}",
            pinned=checkpoint != "latest",
            resumed_by=actor,
        )
        self.store.set_run_state(
            run.id,
            RunState.BACKOFF,
            next_action_at=self.clock(),
            next_attempt=overrides.to_dict(),
            held=False,
            event=(
                "resume-requested",
                f"resume from {checkpoint} requested by {actor}: {note}",
                {"actor": actor, "checkpoint": path},
            ),
        )
        self.on_change()
        where = (
            f"from {Path(path).name}" if path else "(no checkpoint: the trainer starts or resumes by itself)"
        )
        return f"resuming {run.id} {where}"

    async def give_up(self, ref: str, actor: str) -> str:
        run = self.find(ref)
        if run.state.is_final and run.state != RunState.FAILED:
            raise ControlError(f"{run.id} is already {run.state.value}")
        job = self._live_job(run)
        if job:
            await self.slurm.cancel(job)
        self.store.set_run_state(
            run.id,
            RunState.GAVE_UP,
            reason=f"given up by {actor}",
            event=("gave-up", f"given up by {actor}", {"actor": actor}),
        )
        self.on_change()
        return f"gave up on {run.id}"


class DaemonRunControl:
    """What Slack commands call: the same Controller as the CLI, plus status text and silences.

    `sink` is the daemon's NoticeSink: a requested plot goes into the run's thread the same way the
    completion plot does.
    """

    def __init__(self, controller: Controller, settings: Settings, sink: NoticeSink) -> None:
        self.c = controller
        self.settings = settings
        self.sink = sink

    async def resume(self, run: str, checkpoint: str, actor: str) -> str:
        return await self.c.resume(run, checkpoint, actor)

    async def cancel(self, run: str, actor: str) -> str:
        return await self.c.cancel(run, actor)

    async def hold(self, run: str, actor: str) -> str:
        return await self.c.hold(run, actor)

    async def release(self, run: str, actor: str) -> str:
        return await self.c.release(run, actor)

    async def give_up(self, run: str, actor: str) -> str:
        return await self.c.give_up(run, actor)

    async def status(self, run: str | None) -> str:
        if run is None:
            runs = self.c.store.list_runs(include_final=False)
            if not runs:
                return "no active runs"
            return "\n".join(f"{r.id}: {r.state.value}" for r in runs[:30])
        r = self.c.find(run)
        a = self.c.store.latest_attempt(r.id)
        parts = [f"{r.id}: {r.state.value}"]
        if a is not None:
            parts.append(f"attempt {a.n}, job {a.job_id or '-'} {a.slurm_state or ''}".strip())
            if a.slurm_state == "PENDING" and a.reason:
                parts.append(f"pending: {a.reason}")
        if r.final_reason:
            parts.append(r.final_reason)
        return "; ".join(parts)

    async def silence(self, target: str, seconds: float, actor: str) -> str:
        if not target.startswith(RULE_PREFIX):
            self.c.find(target)  # an unknown run is refused with a clear message
        return f"silenced {target} for {seconds / 3600:.1f} h"

    async def plot(self, run: str, actor: str) -> str:
        """`shepherd plot` into the run's thread; the caller is told at once if there is nothing to draw."""
        r = self.c.find(run)
        r, png = await plot_run(
            self.c.store, self.settings.runs_dir, r.id, self.settings.runs_dir / r.id / "curves.png"
        )
        self.sink.publish_plot(r.id, str(png), f"{r.name}: reward and validation")
        return f"plotting {r.id}: the reward and validation curves are on their way into its thread"

    async def report(self, run: str, actor: str) -> str:
        """`shepherd report RUN` in words for the caller, and its timeline picture into the run's thread."""
        r = self.c.find(run)
        rep, png = await report_run(
            self.c.store, r.id, self.settings.runs_dir / r.id / "timeline.png", self.c.clock()
        )
        self.sink.publish_plot(r.id, str(png), timeline_title(rep))
        return f"{r.id}: {slack_summary(rep)}. The timeline is on its way into its thread."
