"""The daemon's memory: every query on runs, attempts, history, decisions, progress and file cursors.

The one rule that makes
crash safety work: the *intent* to submit (an attempt row with its unique tag)
is committed before `sbatch` runs, so after a crash the daemon finds the
intent and asks Slurm by tag whether the job exists, instead of guessing.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from supervisor.domain.runs import (
    AttemptMark,
    AttemptRow,
    AttemptState,
    DecisionRow,
    HistoryEntry,
    MarkKind,
    RunRow,
    RunState,
    StepMark,
)
from supervisor.redact import mask_known, mask_known_in
from supervisor.store.connection import (
    connect,
    connect_readonly,
    schema_version,
    set_write_guard,
    transaction,
)


class Store:
    """A thin, synchronous façade over one SQLite connection (calls take microseconds)."""

    def __init__(
        self,
        path: Path,
        *,
        clock: Callable[[], float] = time.time,
        db: sqlite3.Connection | None = None,
        write_guard: Callable[[], None] | None = None,
    ) -> None:
        """`write_guard` (the daemon's lease) is checked by every transaction: a daemon that lost the lease
        cannot write, whichever of its parts tries."""
        self.path = path
        self.clock = clock
        self.db = db if db is not None else connect(path)
        if write_guard is not None:
            set_write_guard(self.db, write_guard)

    @classmethod
    def open_readonly(cls, path: Path) -> Store:
        """The store's read queries on a read-only connection (`shepherd watch` beside a live daemon)."""
        return cls(path, db=connect_readonly(path))

    def close(self) -> None:
        self.db.close()

    def tx(self) -> AbstractContextManager[sqlite3.Connection]:
        """One IMMEDIATE transaction, or a savepoint inside the caller's (`store.connection.transaction`)."""
        return transaction(self.db)

    @property
    def schema_version(self) -> int:
        return schema_version(self.db)

    # ---- runs ---------------------------------------------------------------------------------------
    def create_run(self, run_id: str, name: str, spec_json: str, spec_path: str) -> RunRow:
        now = self.clock()
        with self.tx() as db:
            db.execute(
                "INSERT INTO runs (id, name, spec_json, spec_path, state, created_at, updated_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (run_id, name, spec_json, spec_path, RunState.QUEUED, now, now),
            )
            self._event(
                db, run_id, None, "queued", f"run {run_id} claimed from the queue", {"spec": spec_path}
            )
        run = self.get_run(run_id)
        assert run is not None
        return run

    def adopt_run(
        self,
        run_id: str,
        name: str,
        spec_json: str,
        spec_path: str,
        *,
        job_id: str,
        tag: str,
        record: dict[str, Any],
    ) -> RunRow:
        """A run whose first attempt is a job submitted by hand (`shepherd adopt`): one transaction."""
        now = self.clock()
        with self.tx() as db:
            db.execute(
                "INSERT INTO runs (id, name, spec_json, spec_path, state, created_at, updated_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (run_id, name, spec_json, spec_path, RunState.PENDING, now, now),
            )
            db.execute(
                "INSERT INTO attempts (run_id, n, tag, state, job_id, intent_at, submitted_at,"
                " overrides_json) VALUES (?, 1, ?, ?, ?, ?, ?, ?)",
                (run_id, tag, AttemptState.SUBMITTED, job_id, now, now, json.dumps(record)),
            )
            self._event(
                db, run_id, 1, "adopted", f"job {job_id}, submitted by hand, adopted as attempt 1", record
            )
        run = self.get_run(run_id)
        assert run is not None
        return run

    def get_run(self, run_id: str) -> RunRow | None:
        row = self.db.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
        return _run(row) if row else None

    def find_runs(self, ref: str) -> list[RunRow]:
        """Runs whose id is `ref`, or whose name is `ref` (newest first), or whose id starts with it."""
        exact = self.get_run(ref)
        if exact:
            return [exact]
        rows = self.db.execute(
            "SELECT * FROM runs WHERE name = ? ORDER BY created_at DESC", (ref,)
        ).fetchall()
        if not rows:
            rows = self.db.execute(
                "SELECT * FROM runs WHERE id LIKE ? ESCAPE '\\' ORDER BY created_at DESC",
                (ref.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%",),
            ).fetchall()
        return [_run(r) for r in rows]

    def list_runs(self, *, include_final: bool = True) -> list[RunRow]:
        rows = self.db.execute("SELECT * FROM runs ORDER BY created_at").fetchall()
        runs = [_run(r) for r in rows]
        return runs if include_final else [r for r in runs if not r.state.is_final]

    def set_run_state(
        self,
        run_id: str,
        state: RunState,
        *,
        reason: str | None = None,
        next_action_at: float | None = None,
        next_attempt: dict[str, Any] | None = None,
        held: bool | None = None,
        event: tuple[str, str, dict[str, Any]] | None = None,
        attempt: int | None = None,
    ) -> None:
        with self.tx() as db:
            self._set_run_state(db, run_id, state, reason, next_action_at, next_attempt, held)
            if event:
                self._event(db, run_id, attempt, *event)

    def _set_run_state(
        self,
        db: sqlite3.Connection,
        run_id: str,
        state: RunState,
        reason: str | None,
        next_action_at: float | None,
        next_attempt: dict[str, Any] | None,
        held: bool | None,
    ) -> None:
        db.execute(
            "UPDATE runs SET state = ?, updated_at = ?, final_reason = COALESCE(?, final_reason),"
            " next_action_at = ?, next_attempt_json = COALESCE(?, next_attempt_json),"
            " held = COALESCE(?, held) WHERE id = ?",
            (
                state,
                self.clock(),
                reason,
                next_action_at,
                json.dumps(next_attempt) if next_attempt is not None else None,
                None if held is None else int(held),
                run_id,
            ),
        )

    def set_spec(
        self, run_id: str, spec_json: str, events: Sequence[tuple[str, str, dict[str, Any]]] = ()
    ) -> None:
        """A person's change to a run's spec between attempts (`resume --set`): the next attempts are built
        from it; `events` say what changed and who changed it."""
        with self.tx() as db:
            db.execute(
                "UPDATE runs SET spec_json = ?, updated_at = ? WHERE id = ?",
                (spec_json, self.clock(), run_id),
            )
            for kind, message, data in events:
                self._event(db, run_id, None, kind, message, data)

    # ---- attempts -----------------------------------------------------------------------------------
    def begin_attempt(
        self,
        run_id: str,
        tag_for: Callable[[int], str],
        overrides: dict[str, Any],
        *,
        generation: int | None = None,
    ) -> AttemptRow:
        """Write the intent to submit attempt n+1 (committed before sbatch is called), with the lease
        generation of the daemon that will submit it."""
        with self.tx() as db:
            n = (
                int(
                    db.execute(
                        "SELECT COALESCE(MAX(n), 0) FROM attempts WHERE run_id = ?", (run_id,)
                    ).fetchone()[0]
                )
                + 1
            )
            db.execute(
                "INSERT INTO attempts"
                " (run_id, n, tag, state, intent_at, overrides_json, checkpoint, generation)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    run_id,
                    n,
                    tag_for(n),
                    AttemptState.INTENT,
                    self.clock(),
                    json.dumps(overrides),
                    overrides.get("checkpoint"),
                    generation,
                ),
            )
            self._set_run_state(db, run_id, RunState.SUBMITTING, None, None, {}, None)
            # A new attempt: why the last one stopped (or who resumed it) is no longer the run's reason.
            db.execute("UPDATE runs SET final_reason = NULL WHERE id = ?", (run_id,))
        attempt = self.get_attempt(run_id, n)
        assert attempt is not None
        return attempt

    def attempt_submitted(self, run_id: str, n: int, job_id: str, *, reconciled: bool = False) -> None:
        with self.tx() as db:
            db.execute(
                "UPDATE attempts SET state = ?, job_id = ?, submitted_at = ? WHERE run_id = ? AND n = ?",
                (AttemptState.SUBMITTED, job_id, self.clock(), run_id, n),
            )
            self._set_run_state(db, run_id, RunState.PENDING, None, None, None, None)
            how = "found by its tag after a restart" if reconciled else "submitted"
            self._event(
                db, run_id, n, "submitted", f"attempt {n} {how}: Slurm job {job_id}", {"job_id": job_id}
            )

    def restart_in_place(
        self,
        prev: AttemptRow,
        tag: str,
        overrides: dict[str, Any],
        *,
        exit_code: int | None,
        ended_at: float | None,
        message: str,
        give_word: Callable[[int], None],
    ) -> AttemptRow:
        """Attempt n+1 as the next driver run of attempt n's job (no sbatch: the job's runner runs it), and
        attempt n ended, in one transaction; `give_word(n + 1)` writes Shepherd's word to the runner inside
        it, last, so the word exists only if the store says so (it raises: nothing is recorded)."""
        now = self.clock()
        n = prev.n + 1
        with self.tx() as db:
            db.execute(
                "UPDATE attempts SET state = ?, ended_at = ?, ended_from = 'runner',"
                " exit_code = COALESCE(?, exit_code), reason = ? WHERE run_id = ? AND n = ?",
                (AttemptState.ENDED, ended_at or now, exit_code, message, prev.run_id, prev.n),
            )
            db.execute(
                "INSERT INTO attempts (run_id, n, tag, state, job_id, intent_at, submitted_at, started_at,"
                " started_from, slurm_state, nodes, overrides_json, checkpoint, generation)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'runner', ?, ?, ?, ?, ?)",
                (
                    prev.run_id,
                    n,
                    tag,
                    AttemptState.SUBMITTED,
                    prev.job_id,
                    now,
                    now,
                    now,
                    prev.slurm_state,
                    prev.nodes,
                    json.dumps(overrides),
                    overrides.get("checkpoint"),
                    prev.generation,
                ),
            )
            self._set_run_state(db, prev.run_id, RunState.RUNNING, None, None, None, None)
            db.execute("UPDATE runs SET final_reason = NULL WHERE id = ?", (prev.run_id,))
            self._event(db, prev.run_id, n, "restarted-in-place", message, {"job_id": prev.job_id})
            give_word(n)
        attempt = self.get_attempt(prev.run_id, n)
        assert attempt is not None
        return attempt

    def attempt_not_submitted(self, run_id: str, n: int, state: AttemptState, message: str) -> None:
        with self.tx() as db:
            db.execute(
                "UPDATE attempts SET state = ?, reason = ?, ended_at = ? WHERE run_id = ? AND n = ?",
                (state, message, self.clock(), run_id, n),
            )
            self._event(
                db,
                run_id,
                n,
                "submit-failed" if state == AttemptState.SUBMIT_FAILED else "reconciled",
                message,
                {},
            )

    def get_attempt(self, run_id: str, n: int) -> AttemptRow | None:
        row = self.db.execute("SELECT * FROM attempts WHERE run_id = ? AND n = ?", (run_id, n)).fetchone()
        return _attempt(row) if row else None

    def attempts(self, run_id: str) -> list[AttemptRow]:
        rows = self.db.execute("SELECT * FROM attempts WHERE run_id = ? ORDER BY n", (run_id,)).fetchall()
        return [_attempt(r) for r in rows]

    def latest_attempt(self, run_id: str) -> AttemptRow | None:
        row = self.db.execute(
            "SELECT * FROM attempts WHERE run_id = ? ORDER BY n DESC LIMIT 1", (run_id,)
        ).fetchone()
        return _attempt(row) if row else None

    def open_attempts(self) -> list[AttemptRow]:
        """Attempts whose job may still exist in Slurm: intents and submitted jobs not yet ended."""
        rows = self.db.execute(
            "SELECT * FROM attempts WHERE state IN (?, ?) ORDER BY run_id, n",
            (AttemptState.INTENT, AttemptState.SUBMITTED),
        ).fetchall()
        return [_attempt(r) for r in rows]

    def ended_without_exit_code(self, ended_after: float) -> list[AttemptRow]:
        """Attempts settled on squeue's word alone (sacct was down or lagging) whose exit code is still due:
        the daemon asks sacct for them on each poll, before and after a restart."""
        rows = self.db.execute(
            "SELECT * FROM attempts WHERE state = ? AND exit_code IS NULL AND job_id IS NOT NULL"
            " AND ended_at > ? ORDER BY run_id, n",
            (AttemptState.ENDED, ended_after),
        ).fetchall()
        return [_attempt(r) for r in rows]

    def observe_attempt(
        self,
        run_id: str,
        n: int,
        *,
        slurm_state: str,
        reason: str | None,
        nodes: str | None,
        exit_code: int | None = None,
        ended: bool = False,
        started: bool = False,
        unknown_since: float | None = None,
        exit_signal: int | None = None,
        started_at: float | None = None,
        ended_at: float | None = None,
    ) -> None:
        """What a poll saw. `started_at` / `ended_at`: Slurm's StartTime / EndTime, which replace a poll time
        recorded earlier; without them a start or end is stamped with this poll's time, marked 'poll'."""
        now = self.clock()
        self.db.execute(
            "UPDATE attempts SET slurm_state = ?, reason = ?, nodes = COALESCE(NULLIF(?, ''), nodes),"
            " exit_code = COALESCE(?, exit_code), exit_signal = COALESCE(?, exit_signal),"
            " last_seen_at = ?, unknown_since = ?,"
            " started_from = CASE WHEN ? IS NOT NULL THEN 'slurm'"
            "  WHEN ? AND started_at IS NULL THEN 'poll' ELSE started_from END,"
            " started_at = CASE WHEN ? IS NOT NULL THEN ?"
            "  WHEN ? AND started_at IS NULL THEN ? ELSE started_at END,"
            " ended_from = CASE WHEN ? IS NOT NULL AND (? OR ended_at IS NOT NULL) THEN 'slurm'"
            "  WHEN ? THEN 'poll' ELSE ended_from END,"
            " ended_at = CASE WHEN ? IS NOT NULL AND (? OR ended_at IS NOT NULL) THEN ?"
            "  WHEN ? THEN ? ELSE ended_at END,"
            " state = CASE WHEN ? THEN ? ELSE state END"
            " WHERE run_id = ? AND n = ?",
            (
                slurm_state,
                reason,
                nodes or "",
                exit_code,
                exit_signal,
                now,
                unknown_since,
                started_at,
                started,
                started_at,
                started_at,
                started,
                now,
                ended_at,
                ended,
                ended,
                ended_at,
                ended,
                ended_at,
                ended,
                now,
                ended,
                AttemptState.ENDED,
                run_id,
                n,
            ),
        )

    def wandb_url(self, run_id: str) -> str | None:
        """The run's W&B page: the newest one its attempts' logs named (a `wandb` event each), else None."""
        row = self.db.execute(
            "SELECT data_json FROM events WHERE run_id = ? AND kind = 'wandb' ORDER BY id DESC LIMIT 1",
            (run_id,),
        ).fetchone()
        url = json.loads(row[0]).get("url") if row else None
        return str(url) if url else None

    def mark_attempt_unknown(self, run_id: str, n: int, message: str) -> None:
        with self.tx() as db:
            db.execute(
                "UPDATE attempts SET state = ?, reason = ?, ended_at = ? WHERE run_id = ? AND n = ?",
                (AttemptState.UNKNOWN, message, self.clock(), run_id, n),
            )
            self._event(db, run_id, n, "unknown", message, {})

    # ---- events and decisions ----------------------------------------------------------------------
    def add_event(
        self, run_id: str, attempt: int | None, kind: str, message: str, data: dict[str, Any] | None = None
    ) -> None:
        self._event(self.db, run_id, attempt, kind, message, data or {})

    def _event(
        self,
        db: sqlite3.Connection,
        run_id: str,
        attempt: int | None,
        kind: str,
        message: str,
        data: dict[str, Any],
    ) -> None:
        # A line a job wrote may hold one of its secrets (env_files, pass_env): the store never keeps one.
        message, data = mask_known(message), mask_known_in(data)
        db.execute(
            "INSERT INTO events (run_id, attempt, at, kind, message, data_json) VALUES (?, ?, ?, ?, ?, ?)",
            (run_id, attempt, self.clock(), kind, message, json.dumps(data, default=str)),
        )

    def events(self, run_id: str, *, limit: int = 200) -> list[HistoryEntry]:
        rows = self.db.execute(
            "SELECT * FROM (SELECT * FROM events WHERE run_id = ? ORDER BY id DESC LIMIT ?) ORDER BY id",
            (run_id, limit),
        ).fetchall()
        return [
            HistoryEntry(
                r["id"],
                r["run_id"],
                r["attempt"],
                r["at"],
                r["kind"],
                r["message"],
                json.loads(r["data_json"]),
            )
            for r in rows
        ]

    def gave_up_by(self, run_id: str) -> str | None:
        """Who gave the run up, when a person did (`shepherd give-up`, Slack's button): the newest gave-up
        event's actor; None when a rule gave up or nobody did."""
        row = self.db.execute(
            "SELECT data_json FROM events WHERE run_id = ? AND kind = 'gave-up' ORDER BY id DESC LIMIT 1",
            (run_id,),
        ).fetchone()
        actor = json.loads(row[0]).get("actor") if row else None
        return str(actor) if actor else None

    def record_decision(
        self,
        run_id: str,
        attempt: int | None,
        *,
        rule: str,
        action: str,
        signature: str,
        reason: str,
        evidence: dict[str, Any],
    ) -> int | None:
        """Record a decision once per (run, attempt, signature); returns None if it was already taken. The
        evidence is kept with every registered secret value masked (redact.mask_known)."""
        reason, signature, evidence = mask_known(reason), mask_known(signature), mask_known_in(evidence)
        try:
            with self.tx() as db:
                cur = db.execute(
                    "INSERT INTO decisions (run_id, attempt, at, rule, action, signature, reason,"
                    " evidence_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        run_id,
                        attempt,
                        self.clock(),
                        rule,
                        action,
                        signature,
                        reason,
                        json.dumps(evidence, default=str),
                    ),
                )
                return int(cur.lastrowid or 0)
        except sqlite3.IntegrityError:
            return None

    def acting_decisions(self, after_id: int = 0) -> list[DecisionRow]:
        """Every decision that did something (not a follow-up), of every run, with an id above `after_id`."""
        rows = self.db.execute(
            "SELECT * FROM decisions WHERE action != 'none' AND id > ? ORDER BY id", (after_id,)
        ).fetchall()
        return [_decision(r) for r in rows]

    def count_attempts(self) -> int:
        """Attempts that became (or may have become) Slurm jobs, over all runs."""
        row = self.db.execute(
            "SELECT COUNT(*) FROM attempts WHERE state != ?", (AttemptState.NEVER_SUBMITTED,)
        ).fetchone()
        return int(row[0])

    def set_decision_outcome(self, decision_id: int, outcome: str) -> None:
        self.db.execute("UPDATE decisions SET outcome = ? WHERE id = ?", (outcome, decision_id))

    def decisions(self, run_id: str) -> list[DecisionRow]:
        rows = self.db.execute("SELECT * FROM decisions WHERE run_id = ? ORDER BY id", (run_id,)).fetchall()
        return [_decision(r) for r in rows]

    # ---- progress and metrics snapshot (for `status` and `watch`) --------------------------------------
    def save_progress(self, run_id: str, attempt: int, data_json: str) -> None:
        self.db.execute(
            "INSERT INTO progress (run_id, attempt, at, data_json) VALUES (?, ?, ?, ?)"
            " ON CONFLICT(run_id) DO UPDATE SET attempt = excluded.attempt, at = excluded.at,"
            " data_json = excluded.data_json",
            (run_id, attempt, self.clock(), data_json),
        )

    def load_progress(self, run_id: str) -> tuple[int, float, dict[str, Any]] | None:
        row = self.db.execute(
            "SELECT attempt, at, data_json FROM progress WHERE run_id = ?", (run_id,)
        ).fetchone()
        return (int(row[0]), float(row[1]), dict(json.loads(row[2]))) if row else None

    def open_incident(self, run_id: str) -> tuple[str, int, float] | None:
        """(headline, events, opened_at) of the run's open Slack incident, for `shepherd status`."""
        row = self.db.execute(
            "SELECT headline, events, opened_at FROM slack_incidents"
            " WHERE run_id = ? AND resolved_at IS NULL",
            (run_id,),
        ).fetchone()
        if row is None:
            return None
        return str(json.loads(row[0]).get("title", "")), int(row[1]), float(row[2])

    # ---- each attempt's timeline (for `shepherd report`) ------------------------------------------------
    def record_step(self, run_id: str, n: int, step: int, at: float, reward: float | None = None) -> None:
        """Attempt n reached `step` at `at` (the earliest report wins; a reward is kept once known)."""
        self.db.execute(
            "INSERT INTO attempt_steps (run_id, attempt, step, at, reward) VALUES (?, ?, ?, ?, ?)"
            " ON CONFLICT(run_id, attempt, step) DO UPDATE SET at = MIN(at, excluded.at),"
            " reward = COALESCE(excluded.reward, reward)",
            (run_id, n, step, at, reward),
        )

    def open_mark(self, run_id: str, n: int, kind: MarkKind, at: float, *, step: int | None = None) -> int:
        cur = self.db.execute(
            "INSERT INTO attempt_marks (run_id, attempt, kind, at, step) VALUES (?, ?, ?, ?, ?)",
            (run_id, n, kind, at, step),
        )
        return int(cur.lastrowid or 0)

    def close_mark(self, mark_id: int, until: float) -> None:
        self.db.execute("UPDATE attempt_marks SET until = ? WHERE id = ? AND until IS NULL", (until, mark_id))

    def latest_step(self, run_id: str) -> StepMark | None:
        """The furthest step of the run's newest attempt that reached one, with the newest reward logged."""
        row = self.db.execute(
            "SELECT run_id, attempt, step, at, reward FROM attempt_steps WHERE run_id = ?"
            " ORDER BY attempt DESC, step DESC LIMIT 1",
            (run_id,),
        ).fetchone()
        if row is None:
            return None
        reward = self.db.execute(
            "SELECT reward FROM attempt_steps WHERE run_id = ? AND reward IS NOT NULL"
            " ORDER BY attempt DESC, step DESC LIMIT 1",
            (run_id,),
        ).fetchone()
        return StepMark(row[0], int(row[1]), int(row[2]), float(row[3]), reward[0] if reward else None)

    def steps(self, run_id: str) -> list[StepMark]:
        rows = self.db.execute(
            "SELECT run_id, attempt, step, at, reward FROM attempt_steps WHERE run_id = ?"
            " ORDER BY attempt, step",
            (run_id,),
        ).fetchall()
        return [StepMark(r[0], int(r[1]), int(r[2]), float(r[3]), r[4]) for r in rows]

    def marks(self, run_id: str) -> list[AttemptMark]:
        rows = self.db.execute(
            "SELECT id, run_id, attempt, kind, at, until, step FROM attempt_marks WHERE run_id = ?"
            " ORDER BY attempt, id",
            (run_id,),
        ).fetchall()
        return [AttemptMark(int(r[0]), r[1], int(r[2]), r[3], float(r[4]), r[5], r[6]) for r in rows]

    # ---- file cursors (the tailer's CursorStore) -----------------------------------------------------
    def load_cursor(self, path: str) -> tuple[int, int, int] | None:
        row = self.db.execute("SELECT inode, offset, line_no FROM cursors WHERE path = ?", (path,)).fetchone()
        return (int(row[0]), int(row[1]), int(row[2])) if row else None

    def save_cursor(self, path: str, inode: int, offset: int, line_no: int) -> None:
        self.save_cursors({path: (inode, offset, line_no)})

    def save_cursors(self, cursors: Mapping[str, tuple[int, int, int]]) -> None:
        """Many files' (inode, offset, line_no) in one transaction: with hundreds of active runs, one
        transaction per file per change would be hundreds of small SQLite commits a second."""
        now = self.clock()
        rows = [(path, inode, offset, line_no, now) for path, (inode, offset, line_no) in cursors.items()]
        if not rows:
            return
        with transaction(self.db):
            self.db.executemany(
                "INSERT INTO cursors (path, inode, offset, line_no, updated_at) VALUES (?, ?, ?, ?, ?)"
                " ON CONFLICT(path) DO UPDATE SET inode = excluded.inode, offset = excluded.offset,"
                " line_no = excluded.line_no, updated_at = excluded.updated_at",
                rows,
            )


def _run(r: sqlite3.Row) -> RunRow:
    return RunRow(
        r["id"],
        r["name"],
        r["spec_json"],
        r["spec_path"],
        RunState(r["state"]),
        r["created_at"],
        r["updated_at"],
        r["next_action_at"],
        r["next_attempt_json"],
        r["final_reason"],
        bool(r["held"]),
    )


def _decision(r: sqlite3.Row) -> DecisionRow:
    return DecisionRow(
        r["id"],
        r["run_id"],
        r["attempt"],
        r["at"],
        r["rule"],
        r["action"],
        r["signature"],
        r["reason"],
        json.loads(r["evidence_json"]),
        r["outcome"],
    )


def _attempt(r: sqlite3.Row) -> AttemptRow:
    return AttemptRow(
        r["run_id"],
        r["n"],
        r["tag"],
        AttemptState(r["state"]),
        r["job_id"],
        r["intent_at"],
        r["submitted_at"],
        r["started_at"],
        r["ended_at"],
        r["slurm_state"],
        r["reason"],
        r["exit_code"],
        r["nodes"],
        r["checkpoint"],
        r["overrides_json"],
        r["unknown_since"],
        r["last_seen_at"],
        r["exit_signal"],
        r["generation"],
        r["started_from"],
        r["ended_from"],
    )
