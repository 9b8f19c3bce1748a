"""Human actions on runs: one code path for the CLI and for Slack.

The CLI runs in its own process: it changes the store (which the daemon reads
every loop) and calls Slurm directly. Every action is recorded as an event
with who asked for it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path

import anyio.to_thread

from supervisor.act.checkpoints import run_checkpoints
from supervisor.act.curves import run_points
from supervisor.decide.staging import describe_kept, trainer_dir
from supervisor.domain.changes import SpecChange, apply_changes, clear_fixes
from supervisor.domain.envfiles import PASS_ENV_FILE, EnvFileError, read_private_env_file
from supervisor.domain.overrides import AttemptOverrides
from supervisor.domain.runs import RunRow, RunState, shown_reason, waits_for_person
from supervisor.domain.spec import JobSpec
from supervisor.domain.yamlpos import YamlDocumentError
from supervisor.notify.plot import render_curves
from supervisor.notify.silences import RULE_PREFIX
from supervisor.notify.timeline import render_timeline
from supervisor.ports import CheckpointResolver, ControlError, NoticeSink, SlurmControl
from supervisor.redact import known_secrets
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


def on_hold_text(run: RunRow, job: str | None, *, submitted_before: bool) -> str:
    """What a hold means for this run, in plain words: what is paused, and what `release` would do."""
    if job:
        return f"job {job} stays in Slurm's queue without starting; `shepherd release {run.id}` lets it start"
    if not submitted_before:
        return f"its first submission waits; `shepherd release {run.id}` submits it"
    ck = AttemptOverrides.from_dict(run.next_attempt).checkpoint
    where = f"from {Path(ck).name}" if ck else "(the trainer resumes from its newest checkpoint, if any)"
    return f"auto-resume is paused; `shepherd release {run.id}` resubmits it {where}"


def run_secrets(run: RunRow) -> tuple[set[str], set[str]]:
    """The names and values of a run's secret variables (its env files', its pass_env), as far as this
    process can read them, with every secret it has registered: what no `--set` may name or carry."""
    spec = run.spec
    names, values = set(spec.pass_env), set(known_secrets())
    files = [*spec.env_files, *([Path(run.spec_path).parent / PASS_ENV_FILE] if spec.pass_env else [])]
    for path in files:
        try:
            env = read_private_env_file(path)
        except (EnvFileError, OSError):  # refused at the next submission, with its reason
            continue
        names.update(env)
        values.update(env.values())
    return names, values


def changed_spec(run: RunRow, sets: Sequence[str], source: str) -> tuple[JobSpec, list[SpecChange]]:
    """The run's spec with a person's `sets` applied, or a ControlError with every located refusal."""
    names, values = run_secrets(run)
    try:
        return apply_changes(run.spec, sets, source=source, secret_names=names, secret_values=values)
    except YamlDocumentError as exc:
        raise ControlError(f"nothing changed, {run.id} not resumed:\n{exc}") from exc


def resume_point_refused(run: RunRow, selector: str, lineage: str | None) -> str | None:
    """Why a person's `resume RUN <selector>` cannot be carried out as asked (None: it can): a step that
    is not there (the steps that are, with their metric), or a step other than the newest for a trainer
    that shepherd cannot point at another."""
    if selector == "latest":
        return None
    spec = run.spec
    if spec.checkpoint is None:
        return (
            f"{run.id}'s spec names no checkpoint dir, so shepherd cannot find {selector}; "
            "`resume` it from latest (the trainer resumes by itself)"
        )
    kept = run_checkpoints(spec, lineage)
    listing = describe_kept(kept, spec.checkpoint.metric)
    chosen = next((k for k in kept if k.name == selector or (selector == "best" and k.best)), None)
    if chosen is None and selector != "best":  # best without a ranked step: the resolver says what it took
        return f"{run.id} has no {selector}; its checkpoints: {listing}"
    if chosen is None:
        return None
    if not chosen.latest and spec.cannot_pick_checkpoint:
        return f"cannot resume {run.id} from {chosen.name}: {spec.cannot_pick_checkpoint}"
    return None


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
        first = self.store.latest_attempt(run.id) is None
        return f"held {run.id}: " + on_hold_text(run, job, submitted_before=not first)

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

    async def resume(self, ref: str, checkpoint: str, actor: str, sets: Sequence[str] = ()) -> str:
        """Resubmit from `checkpoint`; `sets` (KEY=VALUE, domain/changes.py) change the run's spec from this
        attempt on, and drop the rule fixes to the same keys."""
        run = self.find(ref)
        if run.state in (RunState.PENDING, RunState.RUNNING, RunState.SUBMITTING, RunState.QUEUED):
            raise ControlError(f"{run.id} is {run.state.value}; cancel it first or wait for it to end")
        if run.state == RunState.COMPLETED and not sets:
            raise ControlError(
                f"{run.id} completed; submit a new run to train further, or resume it with a change "
                "(--set command+=grpo.max_num_steps=N)"
            )
        new_spec, changes = changed_spec(run, sets, "--set" if actor.startswith("cli:") else "set")
        last = self.store.latest_attempt(run.id)
        lineage = AttemptOverrides.from_dict(last.overrides).checkpoint_dir if last else None
        refused = resume_point_refused(run, checkpoint, lineage)
        if refused:
            raise ControlError(refused)
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
        if changes:
            overrides = clear_fixes(overrides, changes)
            self.store.set_spec(
                run.id,
                new_spec.model_dump_json(),
                [
                    ("spec-changed", f"{c.describe()} (set by {actor})", {"actor": actor, **c.to_dict()})
                    for c in changes
                ],
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
        changed = f"; changed: {', '.join(c.describe() for c in changes)}" if changes else ""
        return f"resuming {run.id} {where}{changed}"

    async def give_up(self, ref: str, actor: str) -> str:
        run = self.find(ref)
        # A rule's give-up still waits for a person: theirs closes it (and its Slack incident).
        by_rule = run.state == RunState.GAVE_UP and self.store.gave_up_by(run.id) is None
        if run.state.is_final and run.state != RunState.FAILED and not by_rule:
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

    async def resume(self, run: str, checkpoint: str, actor: str, sets: Sequence[str] = ()) -> str:
        return await self.c.resume(run, checkpoint, actor, sets)

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
            # What waits for a person first (a stopped run is no longer active, and it is the one to act on).
            store = self.c.store
            runs = [(r, self._waits(r)) for r in store.list_runs()]
            shown = [(r, w) for r, w in runs if w] + [
                (r, w) for r, w in runs if not w and not r.state.is_final
            ]
            if not shown:
                return "no active runs, and none waits for a person"
            return "\n".join(
                f"{r.id}: {r.state.value}"
                + (" (held)" if r.held else "")
                + (" — needs a person" if w else "")
                for r, w in shown[:30]
            )
        r = self.c.find(run)
        a = self.c.store.latest_attempt(r.id)
        parts = [f"{r.id}: {r.state.value}"]
        if a is not None:
            parts.append(f"attempt {a.n}, job {a.job_id or '-'} {a.slurm_state or ''}".strip())
            if a.slurm_state == "PENDING" and a.reason:
                parts.append(f"pending: {a.reason}")
        if shown_reason(r):
            parts.append(str(shown_reason(r)))
        if url := self.c.store.wandb_url(r.id):
            parts.append(f"W&B {url}")
        return "; ".join(parts)

    def _waits(self, r: RunRow) -> bool:
        given_up_by = self.c.store.gave_up_by(r.id) if r.state == RunState.GAVE_UP else None
        return waits_for_person(r, given_up_by=given_up_by)

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
