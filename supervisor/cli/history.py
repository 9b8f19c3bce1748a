"""`shepherd history RUN`: a run's whole story in order (its attempts, the rules' decisions, what people and
the daemon changed) with who did each, so "why does it run from step 20 with batch 4" has one answer."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from supervisor.cli.common import AddCommand, open_store, readable_actors, run_named, settings_of
from supervisor.domain.changes import change_log
from supervisor.domain.jobstate import describe_exit
from supervisor.domain.runs import AttemptRow, DecisionRow, HistoryEntry

# Events the attempts' own rows already tell (when submitted, when running): shown once, from the rows.
TOLD_BY_ATTEMPTS = frozenset({"submitted", "running"})
# Who wrote an entry that names nobody: the daemon (its own bookkeeping) or Slurm (an attempt's job).
DAEMON = "shepherd"
SLURM = "slurm"


@dataclass(frozen=True, slots=True)
class Entry:
    """One line of a run's history: when, about which attempt, what (`kind`), who, and what happened."""

    at: float
    attempt: int | None
    kind: str
    by: str
    text: str
    data: dict[str, Any]


def register(add: AddCommand) -> None:
    h = add("history", cmd_history, "a run's attempts, decisions and changes, in order, with who made them")
    h.add_argument("run")
    h.add_argument("--json", action="store_true")


def attempt_entries(a: AttemptRow) -> list[Entry]:
    """An attempt's submission, start and end, from its row."""
    out: list[Entry] = []
    ck = f" from {a.checkpoint}" if a.checkpoint else ""
    if a.submitted_at is not None:
        out.append(
            Entry(
                a.submitted_at,
                a.n,
                "submitted",
                DAEMON,
                f"attempt {a.n} submitted: Slurm job {a.job_id}{ck}",
                {"job_id": a.job_id, "checkpoint": a.checkpoint, "overrides": a.overrides},
            )
        )
    elif a.ended_at is not None:  # never a job: sbatch refused it, or reconciliation proved it never ran
        reason = f": {a.reason}" if a.reason else ""
        out.append(
            Entry(a.ended_at, a.n, "not-submitted", DAEMON, f"attempt {a.n} {a.state.value}{reason}", {})
        )
        return out
    if a.started_at is not None:
        where = f" on {a.nodes}" if a.nodes else ""
        out.append(
            Entry(a.started_at, a.n, "started", SLURM, f"attempt {a.n} running{where}", {"nodes": a.nodes})
        )
    if a.ended_at is not None:
        end = a.slurm_state or a.state.value
        exit_ = f" {describe_exit(a.exit_code, a.exit_signal)}" if a.exit_code is not None else ""
        data = {"slurm_state": a.slurm_state, "exit_code": a.exit_code, "exit_signal": a.exit_signal}
        out.append(Entry(a.ended_at, a.n, "ended", SLURM, f"attempt {a.n} ended: {end}{exit_}", data))
    return out


def decision_entry(d: DecisionRow) -> Entry:
    outcome = f" [{d.outcome}]" if d.outcome else ""
    return Entry(
        d.at,
        d.attempt,
        "decision",
        f"rule {d.rule}",
        f"{d.action}: {d.reason}{outcome}",
        {"rule": d.rule, "action": d.action, "outcome": d.outcome, "signature": d.signature},
    )


def event_entry(e: HistoryEntry) -> Entry:
    """An event as recorded; `actor` in its data (a person's command, a `--set` change) or `rule` (a rule's
    give-up) says who."""
    actor, rule = e.data.get("actor"), e.data.get("rule")
    return Entry(
        e.at,
        e.attempt,
        e.kind,
        readable_actors(str(actor)) if actor else f"rule {rule}" if rule else DAEMON,
        readable_actors(e.message),
        e.data,
    )


def fix_entries(attempts: Sequence[AttemptRow], events: Sequence[HistoryEntry]) -> list[Entry]:
    """What a rule changed for an attempt (an env patch, an sbatch option, a node left out), when the attempt
    first carried it. A person's `--set` is an event of its own (`spec-changed`), shown as recorded."""
    return [
        Entry(c["at"], c["attempt"], "changed", str(c["by"]), str(c["what"]), {})
        for c in change_log(events, attempts)
        if c["attempt"] is not None
    ]


def history(
    attempts: Sequence[AttemptRow], decisions: Sequence[DecisionRow], events: Sequence[HistoryEntry]
) -> list[Entry]:
    """Everything that happened to a run, oldest first (at equal times: attempts, then decisions, then the
    events that followed them, in the order they were written). Any event kind is shown as recorded, so a
    new kind (a change a person made, say) appears here without a change to this function."""
    keyed: list[tuple[float, int, int, Entry]] = []
    for a in attempts:
        keyed.extend((x.at, 0, a.n, x) for x in attempt_entries(a))
    keyed.extend((d.at, 1, d.id, decision_entry(d)) for d in decisions)
    keyed.extend((e.at, 2, e.id, event_entry(e)) for e in events if e.kind not in TOLD_BY_ATTEMPTS)
    keyed.extend((x.at, 0, x.attempt or 0, x) for x in fix_entries(attempts, events))
    return [x for *_, x in sorted(keyed, key=lambda k: k[:3])]


def history_lines(entries: Sequence[Entry]) -> list[str]:
    """One line per entry: `2026-11-27 12:01:05  #2  decision  rule cuda-oom  resume: ...`."""
    out = []
    for x in entries:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(x.at))
        att = f"#{x.attempt}" if x.attempt is not None else "-"
        out.append(f"{when}  {att:>3}  {x.kind:<16} {x.by:<24} {x.text}")
    return out


def cmd_history(args: argparse.Namespace) -> int:
    store = open_store(settings_of(args))
    run = run_named(store, args.run)
    # Every event (the default limit keeps `status` short; a history is the whole story).
    entries = history(store.attempts(run.id), store.decisions(run.id), store.events(run.id, limit=1_000_000))
    if args.json:
        print(json.dumps([asdict(x) for x in entries], indent=2, default=str))
        return 0
    print(f"history of {run.id} ({run.state.value})")
    for line in history_lines(entries):
        sys.stdout.write(line + "\n")
    return 0
