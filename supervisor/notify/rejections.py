"""Specs refused at intake, told to the channel as one message for many (the daemon gathers a flood's
rejections first), so a thousand bad files make one message and whoever holds a run id `submit` printed
still hears why it never ran."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from supervisor.domain.notices import Notice

SHOWN = 10  # rejections named in the message; the rest are counted
REASON_CHARS = 200


class RejectedSpec(Protocol):
    """What the message needs of a rejection (intake/queue.py's `Rejected`)."""

    @property
    def source(self) -> Path: ...

    @property
    def errors(self) -> list[str]: ...

    @property
    def run_id(self) -> str | None: ...


def rejections_notice(rejected: Sequence[RejectedSpec], *, thread: str, rejected_dir: Path) -> Notice | None:
    """One notice for all of `rejected` (None when there is none)."""
    if not rejected:
        return None
    n = len(rejected)
    lines = []
    for r in rejected[:SHOWN]:
        who = f"{r.run_id} ({r.source.name})" if r.run_id else r.source.name
        reason = r.errors[0] if r.errors else "no reason recorded"
        if len(reason) > REASON_CHARS:
            reason = reason[: REASON_CHARS - 1] + "…"
        more = f" (+{len(r.errors) - 1} more problem(s))" if len(r.errors) > 1 else ""
        lines.append(f"• {who}: {reason}{more}")
    if n > SHOWN:
        lines.append(f"… and {n - SHOWN} more")
    lines.append(
        f"Never submitted. Every problem is in {rejected_dir}/<name>.error.txt; "
        "`shepherd status <run>` shows them, `shepherd status` lists recent rejections."
    )
    return Notice(
        thread,
        "rejected",
        f"{n} spec{'s' if n != 1 else ''} rejected at intake",
        text="\n".join(lines),
        level="warning",
        fields={"name": "shepherd daemon"},
    )
