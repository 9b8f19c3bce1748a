"""What a resume changes relative to the spec: a checkpoint, env patches, sbatch args, excluded nodes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


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
        }
