"""What a resume changes relative to the spec: a checkpoint, env patches, sbatch args, excluded nodes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

from supervisor.domain.spec import JobSpec
from supervisor.domain.trainer_files import STEP_DIR_RE


@dataclass(frozen=True, slots=True)
class AttemptOverrides:
    """What a resume changes relative to the spec."""

    checkpoint: str | None = None
    checkpoint_dir: str | None = None  # a staged dir the trainer must read instead of the spec's (NeMo RL)
    env: Mapping[str, str] = field(default_factory=dict)
    sbatch_args: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    mounts: tuple[str, ...] = ()  # container mounts added to the spec's (a shared cache dir, say)
    reason: str = ""
    # Chosen over the newest (a rollback, `best`, a named step): if the old job saves a newer step on its way
    # out, a trainer that resumes by itself must still get this one (act/checkpoints.py, keep_the_choice).
    pinned: bool = False
    # Who resumed it by hand (`shepherd resume`, Slack): the policy counts budgets and streaks afresh from
    # an attempt a person started, or it would give up again at the very next failure (decide/policy.py).
    resumed_by: str | None = None
    # A planned hop of a chain (saved at its deadline, preempted after a save), not a failure: people are told
    # in one line, with no incident, and the next attempt's submission and start are not announced.
    planned: bool = False
    # `checkpointing.save_period` for this attempt, when `checkpoint.tune_interval` set it (act/interval.py).
    save_period: int | None = None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> AttemptOverrides:
        return cls(
            checkpoint=d.get("checkpoint"),
            checkpoint_dir=d.get("checkpoint_dir"),
            env=dict(d.get("env") or {}),
            sbatch_args=tuple(d.get("sbatch_args") or ()),
            exclude=tuple(d.get("exclude") or ()),
            mounts=tuple(d.get("mounts") or ()),
            reason=str(d.get("reason") or ""),
            pinned=bool(d.get("pinned", False)),
            resumed_by=d.get("resumed_by"),
            planned=bool(d.get("planned", False)),
            save_period=_period(d.get("save_period")),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "checkpoint": self.checkpoint,
            "checkpoint_dir": self.checkpoint_dir,
            "env": dict(self.env),
            "sbatch_args": list(self.sbatch_args),
            "exclude": list(self.exclude),
            "mounts": list(self.mounts),
            "reason": self.reason,
            "pinned": self.pinned,
            "resumed_by": self.resumed_by,
            "planned": self.planned,
            "save_period": self.save_period,
        }


def _period(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 1 else None


def resume_step(recorded: Mapping[str, Any], spec: JobSpec) -> int | None:
    """The step an attempt starts from, from what was recorded at its submission (its overrides).

    The checkpoint it was handed (`step_N`); else, for a trainer that resumes from its newest step by itself
    (`resume.pass_checkpoint: null`), the newest step when it was submitted; else 0 (from scratch). None when
    nothing tells: a self-resuming trainer whose checkpoints the spec does not name.
    """
    checkpoint = recorded.get("checkpoint")
    if checkpoint:
        m = STEP_DIR_RE.match(PurePath(str(checkpoint)).name)
        return int(m.group(1)) if m else None
    if spec.resume.pass_checkpoint is not None:
        return 0
    if spec.checkpoint is None:
        return None
    newest = recorded.get("ckpt_step_at_submit")
    return int(newest) if newest is not None else 0
