"""What needs a person, first: which runs wait for one, why, and the command that moves each on; and which
runs `status` lists (`--active`, `--needs-human`, `--since`, `-n`). Pure, but `waiting_in` reads the store."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from supervisor.domain.overrides import AttemptOverrides
from supervisor.domain.runs import RunRow, RunState, waits_for_person
from supervisor.rules.model import parse_duration
from supervisor.store import Store


@dataclass(frozen=True, slots=True)
class Waiting:
    """A run that waits for a person: why, and the commands that move it on."""

    why: str
    commands: tuple[str, ...]

    def text(self) -> str:
        return f"{self.why}; " + " or ".join(f"`{c}`" for c in self.commands)


def waiting(run: RunRow, *, given_up_by: str | None, now: float) -> Waiting | None:
    """Why `run` waits for a person and what moves it on, or None when nothing waits for anyone."""
    if not waits_for_person(run, given_up_by=given_up_by):
        return None
    if run.state in (RunState.FAILED, RunState.GAVE_UP):
        said = "stopped" if run.state == RunState.FAILED else "gave up"
        why = f"{said}: {run.final_reason}" if run.final_reason else said
        return Waiting(why, (f"shepherd resume {run.id}", f"shepherd give-up {run.id}"))
    return Waiting(held_text(run, now), (f"shepherd release {run.id}",))


def waiting_in(store: Store, run: RunRow, now: float) -> Waiting | None:
    """`waiting`, with who gave the run up read from the store (only a given-up run needs it)."""
    given_up_by = store.gave_up_by(run.id) if run.state == RunState.GAVE_UP else None
    return waiting(run, given_up_by=given_up_by, now=now)


def held_text(run: RunRow, now: float) -> str:
    """A held run in plain words: what is paused (never "next resubmission at <a past time>")."""
    if run.state == RunState.HELD:
        return "held: its job waits in Slurm's queue without starting"
    if run.state == RunState.BACKOFF:
        ck = AttemptOverrides.from_dict(run.next_attempt).checkpoint
        where = f" from {Path(ck).name}" if ck else ""
        due = run.next_action_at
        when = (
            "at once" if due is None or due <= now else f"at {time.strftime('%H:%M:%S', time.localtime(due))}"
        )
        return f"held: auto-resume is paused; on release it resubmits{where} {when}"
    return "held: its next submission waits"


def parse_since(text: str, now: float) -> float:
    """`--since`: a duration back from now (30m, 2h, 1d) or a time (2026-11-27 09:00, 09:00 today), as an
    epoch; ValueError says what is accepted."""
    try:
        return now - parse_duration(text)
    except ValueError:
        pass
    try:
        if ":" in text and "-" not in text:  # a time of day: today's
            hm = datetime.strptime(text, "%H:%M" if text.count(":") == 1 else "%H:%M:%S").time()
            return datetime.combine(datetime.fromtimestamp(now).date(), hm).timestamp()
        return datetime.fromisoformat(text).timestamp()  # a naive time is local
    except ValueError:
        raise ValueError(
            f"--since {text!r}: expected a duration (30m, 2h, 1d) or a time (09:00, 2026-11-27 09:00)"
        ) from None


@dataclass(frozen=True, slots=True)
class Selection:
    """Which runs `status` lists."""

    active: bool = False  # not ended, or waiting for a person
    needs_human: bool = False
    since: float | None = None  # created or changed since
    newest: int | None = None  # the newest N of those


def select(
    runs: Sequence[RunRow], sel: Selection, waits: Callable[[RunRow], Waiting | None]
) -> list[tuple[RunRow, Waiting | None]]:
    """The runs `sel` asks for, those waiting for a person first (oldest first within each group)."""
    picked = [(r, waits(r)) for r in sorted(runs, key=lambda r: r.created_at)]
    if sel.needs_human:
        picked = [(r, w) for r, w in picked if w is not None]
    if sel.active:
        picked = [(r, w) for r, w in picked if w is not None or not r.state.is_final]
    if sel.since is not None:
        since = sel.since
        picked = [(r, w) for r, w in picked if max(r.created_at, r.updated_at) >= since]
    if sel.newest is not None:
        picked = picked[-sel.newest :] if sel.newest > 0 else []
    return [p for p in picked if p[1] is not None] + [p for p in picked if p[1] is None]
