"""What the daemon tells people about a run, independent of where it is said (log, Slack)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Level = Literal["debug", "info", "warning", "error"]
LEVELS: dict[str, int] = {"debug": 10, "info": 20, "warning": 30, "error": 40}


@dataclass(frozen=True, slots=True)
class Notice:
    """One thing worth telling people about a run."""

    run_id: str
    kind: str  # opened, started, resumed, alert, completed, gave_up, cancelled, ...
    title: str
    text: str = ""
    level: Level = "info"
    excerpt: str | None = None
    needs_human: bool = False  # also summarised in the channel, with buttons
    fields: dict[str, str] = field(default_factory=dict)
    rule: str | None = None
