"""Slack end to end: the real daemon (a subprocess) on the real dev Slurm cluster, talking to the loopback
Slack stand-in (in this process, on its own loop in a background thread) over the real slack-sdk clients.

One daemon and one stand-in serve the whole module; each test has its own runs. Jobs use plain.sub (ray.sub's
log layout without Ray) so an attempt takes seconds.
"""

from __future__ import annotations

import html
import json
import re
import sqlite3
import string
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from supervisor.notify.slack import blocks as bk
from supervisor.notify.slack.notifier import UNBOUNDED_KINDS
from tests.support.daemon import REPO, DaemonProcess, wait_for
from tests.support.specs import fake_argv, records, write_spec
from tests.support.standin_thread import StandinThread, slack_env, wait_connected

pytestmark = pytest.mark.slurm
PLAIN = REPO / "tests" / "support" / "plain.sub"
CHANNEL = "C0E2E"
ALICE = "U0ALICE"  # in slack.authorised_users
MALLORY = "U0MALLORY"  # not
FINAL = {"COMPLETED", "FAILED", "GAVE_UP", "CANCELLED"}


@pytest.fixture(scope="module")
def slack() -> Iterator[StandinThread]:
    s = StandinThread().start()
    yield s
    s.stop()


@pytest.fixture(scope="module")
def sup(tmp_path_factory: pytest.TempPathFactory, slurm_cluster: Any, slack: StandinThread) -> Any:
    root = tmp_path_factory.mktemp("slack-e2e")
    env = {
        **slurm_cluster.env,
        "SHEPHERD_LAUNCH_SCRIPT": str(PLAIN),
        **slack_env(slack.standin, CHANNEL, "xoxb-1111-2222-e2etoken", "xapp-1-A0E2E-3333-e2eapptoken"),
        "SHEPHERD_SLACK__AUTHORISED_USERS": json.dumps([ALICE]),
        # Fast retries, and a small cap on the backoff: after a minute-long outage the sender's next try is
        # at most ~1 s away (the default cap is 60 s), so the outbox drains soon after the stand-in is back.
        "SHEPHERD_SLACK__RETRY_INITIAL_S": "0.2",
        "SHEPHERD_SLACK__RETRY_MAX_S": "1",
        "SHEPHERD_SLACK__SOCKET_PING_INTERVAL_S": "1",
    }
    d = DaemonProcess(root / "root", env=env)
    d.start()
    wait_connected(slack, d.stop, d.log_text)
    yield d
    d.stop()


# -- helpers --------------------------------------------------------------------------------------------


def spec(
    tmp: Path, name: str, command: list[str], rules: str = "", resume: str = "", use_default: bool = True
) -> tuple[Path, Path]:
    """A spec file, and the run's checkpoint dir."""
    path = write_spec(tmp, name, command, rules=rules, resume=resume, use_default=use_default)
    return path, tmp / name / "ckpt"


fake = fake_argv


def db(sup: DaemonProcess) -> sqlite3.Connection:
    return sqlite3.connect(str(sup.root / "state" / "shepherd.sqlite3"), timeout=10)


def thread_ts(sup: DaemonProcess, run: str) -> str:
    """The ts of the run's opening message, once Slack has it."""

    def ts() -> str | None:
        with db(sup) as c:
            row = c.execute("SELECT ts FROM slack_threads WHERE run_id = ?", (run,)).fetchone()
        return row[0] if row and row[0] else None

    return str(wait_for(ts, 60, 0.2, f"the thread of {run}"))


def kind_of(msg: dict[str, Any]) -> str:
    """The event kind from the message's context line (`run` · kind · level)."""
    for b in msg.get("blocks") or []:
        if b.get("type") == "context":
            parts = b["elements"][0]["text"].split(" · ")
            if len(parts) >= 2 and parts[0].startswith("`"):
                return str(parts[1])
    return "opened" if any(b.get("type") == "header" for b in msg.get("blocks") or []) else "?"


def in_thread(slack: StandinThread, ts: str) -> list[dict[str, Any]]:
    return [m for m in slack.recorded().messages if m["thread_ts"] == ts]


def wait_message(slack: StandinThread, ts: str, pred: Any, what: str, timeout: float = 60) -> dict[str, Any]:
    found = wait_for(lambda: next((m for m in in_thread(slack, ts) if pred(m)), None), timeout, 0.2, what)
    return dict(found)


def code_blocks(msg: dict[str, Any]) -> list[str]:
    texts = [b["text"]["text"] for b in msg.get("blocks") or [] if b.get("type") == "section" and "text" in b]
    return [html.unescape(t[3:-3]) for t in texts if t.startswith("```") and t.endswith("```")]


def top_level(slack: StandinThread, name: str) -> list[dict[str, Any]]:
    """Lines posted in the channel itself (not in a thread) about run `name`."""
    return [m for m in slack.recorded().messages if not m["thread_ts"] and name in (m["text"] or "")]


def ephemerals_for(slack: StandinThread, user: str) -> list[dict[str, Any]]:
    return [e for e in slack.recorded().ephemerals if e["user"] == user]


def slack_command(slack: StandinThread, via: str, run: str, user: str, alert: dict[str, Any]) -> str:
    """`/resume RUN latest` typed, or the alert's "Resume from latest" button pressed; returns the reply."""
    before = len(ephemerals_for(slack, user))
    s = slack.standin
    if via == "slash":
        eid = slack.call(s.send_slash("/resume", f"{run} latest", user, CHANNEL))
    else:
        [actions] = [b for b in alert["blocks"] if b.get("type") == "actions"]
        [button] = [e for e in actions["elements"] if e["action_id"] == bk.ACTION_RESUME_LATEST]
        message = {"ts": alert["ts"], "blocks": alert["blocks"]}
        eid = slack.call(s.press_button(button["action_id"], button["value"], user, CHANNEL, message))
    slack.call(s.wait_ack(eid, within=10), timeout=15)
    replies = wait_for(lambda: ephemerals_for(slack, user)[before:], 30, 0.2, f"the reply to {user}")
    return str(replies[0]["text"])


# -- 1. a failure that needs a human, then /resume (or the button) ------------------------------------------

GIVE_UP = """\
rules:
  - name: bad-dataset
    description: the dataset path is wrong; retrying will not help
    priority: 95
    category: failure
    retryable: false
    trigger: {kind: log, regex: "Pretrained run config not found"}
    actions:
      - give_up: {reason: "dataset missing"}
      - alert: {level: error, message: "{run}: {rule}: the dataset is missing"}
"""


@pytest.mark.parametrize("via", ["slash", "button"])
def test_a_given_up_run_is_alerted_with_its_log_lines_and_resumed_from_slack(
    sup: DaemonProcess, slack: StandinThread, tmp_path: Path, via: str
) -> None:
    name = f"e2e-stop-{via}"
    path, ck = spec(tmp_path, name, fake(tmp_path, name, "hf-cache"), rules=GIVE_UP)
    run = sup.submit(path)
    final = sup.wait_state(run, FINAL, timeout=120)
    assert final["state"] == "GAVE_UP" and final["attempts"] == 1, final
    ts = thread_ts(sup, run)

    alert = wait_message(slack, ts, lambda m: kind_of(m) == "gave_up", "the gave-up alert")
    assert "the dataset is missing" in alert["text"]  # the rule's own alert message
    assert "dataset missing" in json.dumps(alert["blocks"])  # and its give_up reason
    [excerpt] = code_blocks(alert)
    assert "Pretrained run config not found" in excerpt  # the matched log line, in a code block
    buttons = {
        e["action_id"]: e["value"] for b in alert["blocks"] if b["type"] == "actions" for e in b["elements"]
    }
    assert buttons[bk.ACTION_RESUME_LATEST] == run
    # The channel's line is posted after the thread's alert (the outbox keeps their order): waited for, not
    # read at once (read at once, it had not been sent yet in a 2026-11-28 clean-ci).
    wait_for(
        lambda: [m for m in top_level(slack, name) if "needs a human" in m["text"]],
        30,
        0.2,
        "the channel's needs-a-human line",
    )

    # Someone not on the list: refused, ephemerally, and nothing happens.
    reply = slack_command(slack, via, run, MALLORY, alert)
    assert "not on the list" in reply
    after = sup.status(run)
    assert after["state"] == "GAVE_UP" and after["attempts"] == 1
    assert not [m for m in in_thread(slack, ts) if kind_of(m) == "command"]
    with db(sup) as c:
        [(outcome,)] = c.execute(
            "SELECT outcome FROM slack_commands WHERE user_id = ? AND run = ?", (MALLORY, run)
        ).fetchall()
    assert outcome == "refused"

    # Alice: the run is resubmitted from its newest checkpoint, and the job really got it.
    reply = slack_command(slack, via, run, ALICE, alert)
    assert reply == f"resuming {run} from step_10"
    final = sup.wait_state(run, FINAL, timeout=120)
    assert final["state"] == "COMPLETED" and final["attempts"] == 2, final
    attempt2 = sup.status(run)["attempt_list"][1]
    assert attempt2["checkpoint"] == str(ck / "step_10")
    first, second = records(tmp_path, name)
    assert "--resume-from" not in first["argv"]
    assert second["argv"][-2:] == ["--resume-from", str(ck / "step_10")]

    note = wait_message(slack, ts, lambda m: kind_of(m) == "command", "the command in the thread")
    assert "Resume from latest requested" in note["text"] and "from step_10" in note["text"]
    assert any(f"<@{ALICE}>" in b["elements"][0]["text"] for b in note["blocks"] if b["type"] == "context")
    wait_message(slack, ts, lambda m: kind_of(m) == "completed", "completed in the thread")
    commands = [m for m in in_thread(slack, ts) if kind_of(m) == "command"]
    assert len(commands) == 1  # Alice's; Mallory's never reached the run
    if via == "button":
        updates = [u for u in slack.recorded().updates if u["ts"] == alert["ts"]]
        assert len(updates) == 1 and f"requested by <@{ALICE}>" in json.dumps(updates[0]["blocks"])
        assert not any(b["type"] == "actions" for b in updates[0]["blocks"])  # the buttons are gone


# -- 2. Slack down while a run fails and is resumed ---------------------------------------------------------

OUTAGE_S = 60.0  # issue #5: "with the stand-in down for a minute during a run's failure and resume"


def test_messages_queued_while_slack_is_down_arrive_afterwards_in_order_once(
    sup: DaemonProcess, slack: StandinThread, tmp_path: Path
) -> None:
    name = "e2e-outage"
    # Resubmitted, not restarted in place: the story told is the resubmission's (resume-scheduled, submitted).
    path, _ = spec(tmp_path, name, fake(tmp_path, name, "cuda-oom", "--sleep", "2"), resume="in_place: false")
    run = sup.submit(path)
    ts = thread_ts(sup, run)  # the opener went through: Slack is up

    def of_run(msgs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [
            m
            for m in msgs
            if m["ts"] == ts or m["thread_ts"] == ts or (m["thread_ts"] is None and name in (m["text"] or ""))
        ]

    slack.call(slack.standin.go_down())
    down_at, down_wall = time.monotonic(), time.time()  # taken once it is down: the downtime is a lower bound
    before = of_run(slack.recorded().messages)
    try:
        final = sup.wait_state(run, FINAL, timeout=120)
        assert final["state"] == "COMPLETED" and final["attempts"] == 2, final  # failed, resumed, completed

        def outbox_waiting() -> bool:
            with db(sup) as c:
                pending, retried = c.execute(
                    "SELECT COUNT(*), MAX(attempts) FROM slack_outbox WHERE run_id = ? AND sent_at IS NULL",
                    (run,),
                ).fetchone()
            return bool(pending >= 3 and (retried or 0) >= 5)

        wait_for(outbox_waiting, 30, 0.2, "messages held in the outbox while Slack is down")
        # Stay down for the whole minute; the sender keeps retrying (capped at retry_max_s) all along.
        time.sleep(max(0.0, OUTAGE_S - (time.monotonic() - down_at)))
        during = of_run(slack.recorded().messages)
        up_at, up_wall = time.monotonic(), time.time()  # taken before it is back: again a lower bound
    finally:
        slack.call(slack.standin.come_back())
    downtime = up_at - down_at
    assert downtime >= OUTAGE_S, f"the stand-in was down for only {downtime:.1f}s"
    assert during == before  # nothing got through while Slack was down

    # The outage spanned the run's failure and its resume: both are in the store, inside the window.
    events = sup.status(run)["events"]
    failed = [e for e in events if e["kind"] == "ended" and e["attempt"] == 1]
    resumed_at = [e["at"] for e in events if e["kind"] == "resume-scheduled"]
    resubmitted = [e["at"] for e in events if e["kind"] == "submitted" and e["attempt"] == 2]
    assert failed and resumed_at and resubmitted, [(e["kind"], e["attempt"]) for e in events]
    for at in (failed[0]["at"], *resumed_at, *resubmitted):
        assert down_wall <= at <= up_wall, (down_wall, at, up_wall)

    def drained() -> bool:
        with db(sup) as c:
            return not c.execute("SELECT 1 FROM slack_outbox WHERE sent_at IS NULL AND dead = 0").fetchone()

    # The completed event is queued just after the run's state changes: wait for it before judging the rest.
    wait_message(slack, ts, lambda m: kind_of(m) == "completed", "completed in the thread")
    wait_for(drained, 60, 0.2, "the outbox to drain")
    with db(sup) as c:
        rows = c.execute(  # messages; the completion's pictures are uploads, checked below
            "SELECT id, payload, result_ts FROM slack_outbox WHERE run_id = ? AND kind != 'upload'"
            " ORDER BY id",
            (run,),
        ).fetchall()
        instance = c.execute("SELECT value FROM slack_meta WHERE key = 'instance'").fetchone()[0]
    expected = [(f"{instance}:{oid}", json.loads(p)["text"], rts) for oid, p, rts in rows]
    got = of_run(slack.recorded().messages)
    assert got[: len(before)] == before
    afterwards = [kind_of(m) for m in got[len(before) :]]
    for kind in ("resumed", "submitted", "completed"):  # the failure's and the resume's messages
        assert kind in afterwards, afterwards
    keys = [(m.get("metadata") or {}).get("event_payload", {}).get("key") for m in got]
    assert len(keys) == len(set(keys)), "a message arrived twice"
    # Every message, in order, once: what Slack got is exactly the outbox, row by row.
    assert [(k, m["text"], m["ts"]) for k, m in zip(keys, got, strict=True)] == expected
    kinds = [kind_of(m) for m in got if m["thread_ts"] == ts]
    story = [k for k in kinds if k in ("resumed", "submitted", "completed")]
    assert story == ["resumed", "submitted", "completed"], kinds
    resumed = next(m for m in got if kind_of(m) == "resumed")
    assert "cuda-oom" in resumed["text"] or "cuda-oom" in json.dumps(resumed["blocks"])
    assert "OutOfMemoryError" in code_blocks(resumed)[0]  # the matched log lines

    # The timeline picture (queued at completion, during the outage) reached the thread, once.
    titles = [
        f["title"] for u in slack.recorded().completed_uploads for f in u["files"] if u["thread_ts"] == ts
    ]
    assert [t for t in titles if t.startswith(f"{name}: timeline")] != [] and len(titles) == len(set(titles))

    # The store tells the same story the thread does.
    events = [e["kind"] for e in sup.status(run)["events"]]
    assert events.count("resume-scheduled") == 1 and "ended" in events

    # Socket Mode came back too: a command after the outage is answered.
    slack.call(slack.standin.wait_connected(within=30), timeout=35)
    before = len(ephemerals_for(slack, ALICE))
    eid = slack.call(slack.standin.send_slash("/status", run, ALICE, CHANNEL))
    slack.call(slack.standin.wait_ack(eid, within=10), timeout=15)
    reply = wait_for(lambda: ephemerals_for(slack, ALICE)[before:], 30, 0.2, "the /status reply")
    assert reply[0]["text"].startswith(f"{run}: COMPLETED")


# -- 3. a flood of failures is bounded ----------------------------------------------------------------------

FLOOD = r"""
incident_window: 0s
rules:
  - name: flood-oom
    description: GPU out of memory (alert only)
    priority: 80
    category: failure
    signature_group: 1
    trigger: {kind: log, regex: 'torch\.OutOfMemoryError: CUDA out of memory \(crash ([a-z]+)\)'}
    actions:
      - alert: {level: error, message: "{run}: out of memory ({signature})"}
"""
N_FAILURES = 20


def test_twenty_failure_alerts_in_a_minute_are_one_incident_message_and_its_resolution(
    sup: DaemonProcess, slack: StandinThread, tmp_path: Path
) -> None:
    """20 failure alerts for one run within seconds (each its own decision), through the real rules engine.

    A real crash loop of 20 *attempts* cannot happen: the policy stops resuming after more than 4 failures in
    10 minutes (thrashing), whatever the spec's budget; so the flood is 20 failures of one running attempt.
    Slack sees one incident: its message (after the group wait, with what arrived meanwhile grouped under
    it), at most one update, and its resolution when the run is cancelled. The per-run flood bound and its
    digest for decisions: tests/notify/slack/test_notifier.py.
    """
    name = "e2e-flood"
    tokens = [a + b for a, b in zip(string.ascii_lowercase, string.ascii_lowercase[::-1], strict=False)]
    tokens = tokens[:N_FAILURES]
    script = (
        "for t in " + " ".join(tokens) + "; do "
        'echo "torch.OutOfMemoryError: CUDA out of memory (crash $t)"; sleep 0.05; done; sleep 300'
    )
    path, _ = spec(tmp_path, name, ["bash", "-c", script], rules=FLOOD, use_default=False)
    run = sup.submit(path)
    try:
        ts = thread_ts(sup, run)

        def alerted() -> int:
            return sum(1 for d in sup.status(run)["decisions"] if d["rule"] == "flood-oom")

        wait_for(lambda: alerted() >= N_FAILURES, 60, 0.5, f"{N_FAILURES} failures recognised")
        assert alerted() == N_FAILURES
        first = wait_message(slack, ts, lambda m: kind_of(m) == "alert", "the incident message", timeout=60)
    finally:
        sup.cli("cancel", run, check=False)
    # The cancelled run's incident resolves: what it still held goes out first.
    resolved = wait_message(slack, ts, lambda m: "Resolved" in m["text"], "the resolution", timeout=60)

    thread = in_thread(slack, ts)
    alerts = [m for m in thread if kind_of(m) == "alert"]
    updates = [m for m in thread if "incident update" in json.dumps(m["blocks"])]
    assert alerts == [first], [m["text"] for m in thread]
    assert "CUDA out of memory" in code_blocks(first)[0]  # the first failure's evidence
    assert len(updates) <= 1 and not [m for m in thread if kind_of(m) == "digest"]
    grouped = re.search(r"\(\+(\d+) related\)", first["text"])
    more = [int(re.search(r"(\d+) more related", u["text"]).group(1)) for u in updates]  # type: ignore[union-attr]
    assert 1 + (int(grouped.group(1)) if grouped else 0) + sum(more) == N_FAILURES  # each one accounted for
    assert f"{N_FAILURES} event(s)" in json.dumps(resolved["blocks"])
    assert len(thread) <= 3 + len([m for m in thread if kind_of(m) in UNBOUNDED_KINDS | {"started"}])
    top = top_level(slack, name)
    assert len([m for m in top if "needs a human" in m["text"]]) == 1


# -- wiring: a spec's notify.level reaches its thread -----------------------------------------------------


@pytest.mark.parametrize(("spec_level", "thread_level"), [("warning", "warning"), ("info", "error")])
def test_a_specs_notify_level_overrides_slack_level_for_its_run(
    tmp_path: Path, spec_level: str, thread_level: str
) -> None:
    """No Slurm needed: build() wires the sink; the default spec level leaves slack.level in force."""
    from supervisor.daemon.compose import build
    from supervisor.domain.notices import Notice
    from supervisor.domain.spec import JobSpec
    from supervisor.settings import Settings, SlackSettings

    slack_settings = SlackSettings(
        mode="socket", bot_token="xoxb-1-2-abc", app_token="xapp-1-2-abc", channel=CHANNEL, level="error"
    )
    built = build(Settings(root=tmp_path / "root", slack=slack_settings))
    try:
        spec = JobSpec.model_validate({"name": "lvl", "command": ["true"], "notify": {"level": spec_level}})
        built.daemon.store.create_run("lvl-1", "lvl", spec.model_dump_json(), str(tmp_path))
        built.daemon.sink.publish(Notice("lvl-1", "opened", "lvl submitted", fields={"name": "lvl"}))
        assert built.slack is not None
        thread = built.slack.notifier.thread("lvl-1")
        assert thread is not None and thread.level == thread_level
        built.daemon.sink.publish(Notice("lvl-1", "started", "running", level="warning"))
        # The opener, plus the warning only where the run's level lets it through.
        assert built.slack.notifier.pending() == (2 if thread_level == "warning" else 1)
    finally:
        built.daemon.store.close()
