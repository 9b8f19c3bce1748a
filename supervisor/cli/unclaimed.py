"""What `shepherd status` says of specs the store does not hold: one still waiting in queue/ (and whether any
daemon is there to claim it) or one the daemon's intake rejected (why, and where its error file is), so a run
id `shepherd submit` printed is never answered with "no run called ID"."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from supervisor.intake.queue import (
    SPEC_SUFFIXES,
    Rejected,
    find_rejection,
    queued_specs,
    recent_rejections,
    submitted_run_id,
)
from supervisor.lease.keeper import read_lease
from supervisor.lease.model import describe, looks_held
from supervisor.settings import Settings

RECENT_REJECTIONS = 10
NO_DAEMON = (
    "no daemon holds the lease for this root, so no daemon has claimed it; start one "
    "(`shepherd daemon`, or `systemctl --user start shepherd`)"
)


def daemon_present(settings: Settings) -> bool:
    """Whether a live daemon seems to hold this root's lease (the wall clock of its last renewal: a hint)."""
    try:
        return looks_held(read_lease(settings.lease_dir), time.time())
    except OSError:
        return False


def _stamp(t: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t)) if t else "-"


def _base(run_id: str, state: str, reason: str) -> dict[str, Any]:
    """The keys of a stored run's summary, so a `status --json` reader sees one shape."""
    return {
        "id": run_id,
        "name": None,
        "state": state,
        "held": False,
        "slurm_job_id": None,
        "slurm_state": None,
        "pending_reason": None,
        "exit_code": None,
        "exit_signal": None,
        "attempts": 0,
        "reason": reason,
        "next_action_at": None,
        "created_at": None,
    }


def queued_entry(path: Path, since: float, daemon: bool) -> dict[str, Any]:
    run_id = submitted_run_id(path) or path.stem
    waiting = "waiting for the daemon to claim it" if daemon else NO_DAEMON
    return {
        **_base(run_id, "UNCLAIMED", f"in the queue, {waiting}"),
        "created_at": since,
        "queue_file": str(path),
        "daemon": daemon,
    }


def rejected_entry(r: Rejected) -> dict[str, Any]:
    first = r.errors[0] if r.errors else "no reason recorded"
    return {
        **_base(r.run_id or r.source.stem, "REJECTED", f"rejected at intake: {first}"),
        "created_at": r.at,
        "rejected_at": r.at,
        "reasons": r.errors,
        "error_file": str(r.error_file),
        "spec_file": str(r.moved_to),
        "queue_name": r.source.name,
    }


def unclaimed_detail(settings: Settings, ref: str) -> dict[str, Any] | None:
    """`ref` (a run id `submit` printed, or a queued file's name) as a spec not in the store, or None."""
    if not ref or "/" in ref:
        return None
    for suffix in SPEC_SUFFIXES:
        path = settings.queue_dir / f"{ref}{suffix}"
        try:
            since = path.stat().st_mtime
        except OSError:
            continue
        return queued_entry(path, since, daemon_present(settings))
    claimed = settings.runs_dir / ref / "spec.yaml"
    if claimed.is_file():  # claimed a moment ago; its row is being written
        return {**_base(ref, "CLAIMED", "claimed by the daemon, being recorded"), "spec_file": str(claimed)}
    rejection = find_rejection(settings.rejected_dir, ref)
    return rejected_entry(rejection) if rejection is not None else None


def print_unclaimed(d: dict[str, Any], settings: Settings) -> None:
    print(f"run       {d['id']}")
    if d["state"] == "REJECTED":
        print(f"state     REJECTED at intake {_stamp(d['rejected_at'])}: the daemon refused it, nothing ran")
        for i, reason in enumerate(d["reasons"] or ["no reason recorded"]):
            print(f"{'reasons' if i == 0 else '':<9} {reason}")
        print(f"errors    {d['error_file']}")
        print(f"spec      {d['spec_file']} (fix it, then `shepherd submit` it again)")
    elif d["state"] == "UNCLAIMED":
        print(f"state     UNCLAIMED: queued in {d['queue_file']} since {_stamp(d['created_at'])}")
        if d["daemon"]:
            print("daemon    waiting for the daemon to claim it (it checks the spec again first)")
        else:
            print(f"daemon    {NO_DAEMON}")
        print(f"          {lease_text(settings)}")
    else:
        print(f"state     {d['state']}: {d['reason']}")


def lease_text(settings: Settings) -> str:
    try:
        return describe(read_lease(settings.lease_dir), time.time())
    except OSError as exc:
        return f"lease: cannot be read ({exc})"


def waiting_and_rejected(settings: Settings) -> tuple[list[dict[str, Any]], list[dict[str, Any]], int]:
    """Specs still in the queue (oldest first), the newest rejections (newest first), and how many
    rejections rejected/ holds in all."""
    daemon = daemon_present(settings)
    queued = [queued_entry(path, since, daemon) for path, since in queued_specs(settings.queue_dir)]
    recent, total = recent_rejections(settings.rejected_dir, RECENT_REJECTIONS)
    return queued, [rejected_entry(r) for r in recent], total


def print_waiting_and_rejected(
    settings: Settings, queued: list[dict[str, Any]], rejected: list[dict[str, Any]], total: int
) -> None:
    if queued:
        who = "waiting for the daemon" if queued[0]["daemon"] else NO_DAEMON.replace(" it;", " them;")
        print(f"queued, not claimed: {len(queued)} in {settings.queue_dir}: {who}")
        for q in queued:
            print(f"  {q['id']:<44} since {_stamp(q['created_at'])}")
    if rejected:
        print(
            f"rejected at intake: {total} in {settings.rejected_dir}"
            + (f" (newest {len(rejected)} shown)" if total > len(rejected) else "")
            + "; `shepherd status ID` shows every reason"
        )
        for r in rejected:
            print(f"  {r['id']:<44} {_stamp(r['rejected_at'])}  {r['reasons'][0] if r['reasons'] else ''}")
