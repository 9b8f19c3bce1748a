"""Every table the daemon keeps, in one place: each migration moves the schema one version up.

The core tables (runs, attempts, events, decisions, cursors, progress) and the Slack side's tables
(outbox, threads, flood control, silences, command audit, incidents) are created here; their owners
write them through their own modules.

Slack's tables:
- slack_outbox: every outgoing Slack call, written synchronously by the notifier and
  delivered in id order per channel by the sender. `in_flight` is set (committed)
  just before the HTTP call and cleared in the same transaction that records
  `sent_at`, so after a crash a row still marked in flight is the only one that may
  already be in Slack (see notifier.py for how it is resolved).
- slack_threads: one thread per run (the ts of the run's first message).
- slack_rate / slack_dedupe: per-run flood control state, so a restart in a crash loop
  doesn't reset the bound.
- slack_silences: run/rule silences from `/shepherd silence`.
- slack_commands: audit log of every command or button press (who, what, when, outcome).
- slack_meta: a random instance id stamped into message metadata.
- slack_incidents (a later migration): one open incident per run, grouping its alerts
  (see incidents.py); the partial unique index keeps it to one.
"""

from __future__ import annotations

_CORE_SCHEMA = """
CREATE TABLE runs (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    spec_json TEXT NOT NULL,
    spec_path TEXT NOT NULL,
    state TEXT NOT NULL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    next_action_at REAL,
    next_attempt_json TEXT,
    final_reason TEXT,
    held INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX runs_state ON runs(state);
CREATE TABLE attempts (
    run_id TEXT NOT NULL REFERENCES runs(id),
    n INTEGER NOT NULL,
    tag TEXT NOT NULL UNIQUE,
    state TEXT NOT NULL,
    job_id TEXT,
    intent_at REAL NOT NULL,
    submitted_at REAL,
    started_at REAL,
    ended_at REAL,
    slurm_state TEXT,
    reason TEXT,
    exit_code INTEGER,
    nodes TEXT,
    checkpoint TEXT,
    overrides_json TEXT,
    unknown_since REAL,
    last_seen_at REAL,
    PRIMARY KEY (run_id, n)
);
CREATE TABLE events (
    id INTEGER PRIMARY KEY,
    run_id TEXT NOT NULL,
    attempt INTEGER,
    at REAL NOT NULL,
    kind TEXT NOT NULL,
    message TEXT NOT NULL,
    data_json TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX events_run ON events(run_id, id);
CREATE TABLE decisions (
    id INTEGER PRIMARY KEY,
    run_id TEXT NOT NULL,
    attempt INTEGER,
    at REAL NOT NULL,
    rule TEXT NOT NULL,
    action TEXT NOT NULL,
    signature TEXT NOT NULL,
    reason TEXT NOT NULL,
    evidence_json TEXT NOT NULL DEFAULT '{}',
    outcome TEXT NOT NULL DEFAULT ''
);
CREATE INDEX decisions_run ON decisions(run_id, id);
CREATE UNIQUE INDEX decisions_once ON decisions(run_id, attempt, signature);
CREATE TABLE cursors (
    path TEXT PRIMARY KEY,
    inode INTEGER NOT NULL,
    offset INTEGER NOT NULL,
    line_no INTEGER NOT NULL,
    updated_at REAL NOT NULL
);
"""


SLACK_SCHEMA_SQL = """
CREATE TABLE IF NOT EXISTS slack_outbox (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    channel TEXT NOT NULL,
    run_id TEXT,
    kind TEXT NOT NULL,
    payload TEXT NOT NULL,
    data BLOB,
    created_at REAL NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    next_try_at REAL NOT NULL DEFAULT 0,
    in_flight INTEGER NOT NULL DEFAULT 0,
    last_error TEXT,
    sent_at REAL,
    result_ts TEXT,
    dead INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS slack_outbox_pending ON slack_outbox(channel, id)
    WHERE sent_at IS NULL AND dead = 0;
CREATE TABLE IF NOT EXISTS slack_threads (
    run_id TEXT PRIMARY KEY,
    run_name TEXT NOT NULL,
    channel TEXT NOT NULL,
    level TEXT NOT NULL DEFAULT 'info',
    opener_id INTEGER,
    ts TEXT,
    created_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS slack_threads_name ON slack_threads(run_name, created_at);
CREATE TABLE IF NOT EXISTS slack_rate (
    run_id TEXT PRIMARY KEY,
    window_start REAL NOT NULL,
    sent INTEGER NOT NULL,
    dropped INTEGER NOT NULL DEFAULT 0,
    dropped_titles TEXT NOT NULL DEFAULT '[]'
);
CREATE TABLE IF NOT EXISTS slack_dedupe (
    run_id TEXT NOT NULL,
    key TEXT NOT NULL,
    last_at REAL NOT NULL,
    PRIMARY KEY (run_id, key)
);
CREATE TABLE IF NOT EXISTS slack_silences (
    target TEXT PRIMARY KEY,
    until REAL NOT NULL,
    actor TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS slack_commands (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at REAL NOT NULL,
    user_id TEXT NOT NULL,
    channel_id TEXT,
    source TEXT NOT NULL,
    raw TEXT NOT NULL,
    action TEXT,
    run TEXT,
    authorised INTEGER NOT NULL,
    outcome TEXT NOT NULL,
    message TEXT
);
CREATE TABLE IF NOT EXISTS slack_meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
"""

SLACK_INCIDENTS_SQL = """
CREATE TABLE IF NOT EXISTS slack_incidents (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL,
    opened_at REAL NOT NULL,
    flush_at REAL NOT NULL,
    headline TEXT NOT NULL,
    message_id INTEGER,
    events INTEGER NOT NULL DEFAULT 1,
    pending TEXT NOT NULL DEFAULT '[]',
    last_update_at REAL,
    last_notice_at REAL,
    recovering_since REAL,
    resolved_at REAL,
    resolution TEXT
);
CREATE UNIQUE INDEX IF NOT EXISTS slack_incidents_open ON slack_incidents(run_id) WHERE resolved_at IS NULL;
"""


_PROGRESS_SCHEMA = """
CREATE TABLE progress (
    run_id TEXT PRIMARY KEY,
    attempt INTEGER NOT NULL,
    at REAL NOT NULL,
    data_json TEXT NOT NULL
);
"""

# What each attempt did with its allocation, for `shepherd report`: the steps it reached (when, with the
# reward logged for them) and the stretches the progress source tells apart (Ray up, training begun,
# validation, checkpointing, a checkpoint written). One row per step and attempt: the run's timeline.
_TIMELINE_SCHEMA = """
CREATE TABLE attempt_steps (
    run_id TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    step INTEGER NOT NULL,
    at REAL NOT NULL,
    reward REAL,
    PRIMARY KEY (run_id, attempt, step)
);
CREATE TABLE attempt_marks (
    id INTEGER PRIMARY KEY,
    run_id TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    kind TEXT NOT NULL,
    at REAL NOT NULL,
    until REAL,
    step INTEGER
);
CREATE INDEX attempt_marks_run ON attempt_marks(run_id, attempt, id);
"""

# The lease generation of the daemon that wrote an attempt's intent (and put it in the job's tag).
_ATTEMPT_GENERATION = "ALTER TABLE attempts ADD COLUMN generation INTEGER;"

# Where an attempt's started_at / ended_at came from: 'slurm' (its StartTime / EndTime) or 'poll' (the
# daemon's clock when it saw the change: Slurm gave none). NULL: before this column, poll times.
_ATTEMPT_TIMES_FROM = """
ALTER TABLE attempts ADD COLUMN started_from TEXT;
ALTER TABLE attempts ADD COLUMN ended_from TEXT;
"""

# Each entry moves the schema from version i to i+1. Never edit a released entry: append.
MIGRATIONS: tuple[str, ...] = (
    _CORE_SCHEMA,
    SLACK_SCHEMA_SQL,
    _PROGRESS_SCHEMA,
    SLACK_INCIDENTS_SQL,
    _TIMELINE_SCHEMA,
    # The signal half of Slurm's ExitCode (`0:9`): without it a killed job read as "exit 0".
    "ALTER TABLE attempts ADD COLUMN exit_signal INTEGER;",
    _ATTEMPT_GENERATION,
    _ATTEMPT_TIMES_FROM,
)
