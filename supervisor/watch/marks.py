"""One attempt's progress observations as timeline marks (steps reached, Ray up, training begun, validation
and checkpoint saves, checkpoints written), so that `shepherd report` can say what its allocation did. Pure:
observations in, marks to record out; the monitor writes them to the store."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import PurePath

from supervisor.domain.runs import MarkKind
from supervisor.domain.trainer_files import STEP_DIR_RE

# status.json phases that are not training steps: their stretches are counted apart.
STRETCHES: dict[str, MarkKind] = {"validating": "validation", "checkpointing": "checkpointing"}
TRAINING_PHASES = frozenset({"generating", "training"})


@dataclass(frozen=True, slots=True)
class Step:
    """The attempt reached `step` at `at` (with the reward logged for it, when the source says)."""

    step: int
    at: float
    reward: float | None = None


@dataclass(frozen=True, slots=True)
class Mark:
    """Something happened at `at`; `lasting`: a stretch that the next `End` of its kind closes."""

    kind: MarkKind
    at: float
    step: int | None = None
    lasting: bool = False


@dataclass(frozen=True, slots=True)
class End:
    kind: MarkKind
    at: float


MarkOp = Step | Mark | End


def _num(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


@dataclass
class MarkTracker:
    """What one attempt's watcher has already marked, so each mark is written once.

    `baseline` is the step the attempt started from (`domain.overrides.resume_step`; None: unknown, so the
    first status.json snapshot tells); `not_before` is when the attempt was decided on: a status.json whose
    process started earlier, or a metrics row written earlier, is an earlier attempt's.
    """

    baseline: int | None
    not_before: float
    last_step: int | None = None
    training: bool = False
    ray_up: bool = False
    stretch: MarkKind | None = None
    checkpoint: str | None = None
    seen_status: bool = False

    def _floor(self) -> int | None:
        if self.baseline is None:
            return self.last_step
        return self.baseline if self.last_step is None else max(self.baseline, self.last_step)

    def status(self, detail: Mapping[str, object], now: float) -> list[MarkOp]:
        """One status.json snapshot (the monitor's "status" progress detail)."""
        started = _num(detail.get("started_at"))
        if started is not None and started < self.not_before:
            return []  # the file still holds the previous attempt's process
        at = _num(detail.get("last_progress_at")) or _num(detail.get("timestamp")) or now
        phase = str(detail.get("phase") or detail.get("state") or "")
        step_value = _num(detail.get("step"))
        step = int(step_value) if step_value is not None else None
        out: list[MarkOp] = []
        if not self.seen_status and phase == "starting" and step is not None:
            self.baseline = step  # the trainer's own word on where it resumed
        self.seen_status = True
        kind = STRETCHES.get(phase)
        if kind != self.stretch:
            if self.stretch is not None:
                out.append(End(self.stretch, at))
            if kind is not None:
                out.append(Mark(kind, at, lasting=True))
            self.stretch = kind
        if phase in TRAINING_PHASES:
            out += self.began_training(at)
        floor = self._floor()
        if step is not None and (floor is None or step > floor):
            out.append(Step(step, at))
            self.last_step = step
        ckpt = detail.get("last_checkpoint")
        if isinstance(ckpt, str) and ckpt != self.checkpoint:
            self.checkpoint = ckpt
            m = STEP_DIR_RE.match(PurePath(ckpt).name)
            stamp = _num(detail.get("timestamp")) or at
            if m is not None and (self.baseline is None or int(m.group(1)) > self.baseline):
                out.append(Mark("checkpoint", stamp, step=int(m.group(1))))
        return out

    def metrics(self, step: int, reward: float | None, at: float, *, timed: bool) -> list[MarkOp]:
        """One metrics row (metrics.jsonl or TensorBoard); `timed`: `at` is the row's own time."""
        if timed and at < self.not_before:
            return []
        if self.baseline is not None and step <= self.baseline:
            return []  # a row up to the checkpoint, kept or re-read after the trainer's rewrite
        if self.last_step is None or step > self.last_step:
            self.last_step = step
        return [Step(step, at, reward)]

    def began_training(self, at: float) -> list[MarkOp]:
        """The first sign of training work (a rollout bar, a generating or training phase)."""
        if self.training:
            return []
        self.training = True
        return [Mark("training", at)]

    def ray_started(self, at: float) -> list[MarkOp]:
        """The launcher's STARTED_RAY_HEAD (written once the GCS listens)."""
        if self.ray_up:
            return []
        self.ray_up = True
        return [Mark("ray_up", max(at, self.not_before))]
