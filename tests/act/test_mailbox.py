"""A person's command reaches the one process that may act: the lease holder through the request folder, or,
with no live holder, the CLI itself under the lease; never a CLI acting unfenced beside a live daemon."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import anyio
import pytest

from supervisor.act.control import Controller
from supervisor.act.mailbox import Mailbox, Reply, Request, ask, serve
from supervisor.domain.overrides import AttemptOverrides
from supervisor.domain.runs import RunState
from supervisor.lease import Lease, NotLeader
from supervisor.lease.files import LeaseFolder
from supervisor.lease.keeper import read_lease
from supervisor.lease.model import LeaseRecord
from supervisor.ports import ControlError
from supervisor.settings import LeaseSettings, Settings, SlurmSettings
from supervisor.store import Store

RUN = "toy-20261124-000000-abcd"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def settings(tmp_path: Path, wait_s: float = 5.0) -> Settings:
    s = Settings(
        root=tmp_path / "root",
        lease=LeaseSettings(ttl_s=1.5, renew_every_s=0.1, margin_s=0.3, request_wait_s=wait_s),
        slurm=SlurmSettings(command_timeout_s=0.5),
    )
    s.ensure_dirs()
    return s


def with_run(s: Settings) -> None:
    store = Store(s.db_path)
    store.create_run(RUN, "toy", json.dumps({"name": "toy", "command": ["true"]}), "/x")
    store.close()


def run_state(s: Settings) -> RunState:
    store = Store(s.db_path)
    try:
        run = store.get_run(RUN)
        assert run is not None
        return run.state
    finally:
        store.close()


def holder_lease(s: Settings, pid: int = 4242, wall_offset: float = 0.0) -> Lease:
    lease = Lease(
        s.lease_dir,
        ttl_s=s.lease.ttl_s,
        margin_s=s.lease.margin_s,
        renew_every_s=s.lease.renew_every_s,
        host="login1",
        pid=pid,
        wall=lambda: time.time() + wall_offset,
    )
    lease.machine = "login1-boot/1"  # another machine: its pid says nothing here
    assert lease.try_acquire() is None
    return lease


# ---- the protocol ----------------------------------------------------------------------------------------


def test_a_posted_request_is_taken_once_answered_and_collected(tmp_path: Path) -> None:
    box = Mailbox(tmp_path / "requests")
    req = Request.new("cancel", {"run": RUN}, "cli:alice", 60, "login2:7")
    box.post(req)
    taken = box.take()
    assert [(rid, r.verb, r.args) for rid, r in taken if isinstance(r, Request)] == [
        (req.id, "cancel", {"run": RUN})
    ]
    assert box.take() == []  # taken once: a second holder (or a second look) finds nothing
    assert not box.withdraw(req.id)  # too late to withdraw: the holder will act
    assert box.reply(req.id) is None
    box.answer(req.id, Reply(True, "cancelled", "login1:1"))
    assert box.reply(req.id) == Reply(True, "cancelled", "login1:1")
    box.collect(req.id)
    assert sorted(os.listdir(box.folder)) == []


def test_a_withdrawn_request_is_never_taken(tmp_path: Path) -> None:
    box = Mailbox(tmp_path / "requests")
    req = Request.new("hold", {"run": RUN}, "cli:alice", 60, "login2:7")
    box.post(req)
    assert box.withdraw(req.id)
    assert box.take() == []


def test_a_request_that_is_not_one_is_answered_with_why(tmp_path: Path) -> None:
    box = Mailbox(tmp_path / "requests")
    box.folder.mkdir()
    (box.folder / "junk.json").write_text('["not", "an", "object"]')
    (box.folder / "big.json").write_text('{"verb": "' + "x" * 20000 + '"}')
    ((rid1, why1), (rid2, why2)) = box.take()
    assert (rid1, rid2) == ("big", "junk")
    assert "request big" in str(why1) and "not a JSON object" in str(why2)


# ---- the holder's loop -----------------------------------------------------------------------------------


async def serve_until_answered(box: Mailbox, handlers: dict, req: Request) -> Reply:  # type: ignore[type-arg]
    box.post(req)
    reply = None
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: serve(box, handlers, who=lambda: "login1:1, generation 3", poll_s=0.01))
        with anyio.fail_after(10):
            while (reply := box.reply(req.id)) is None:  # noqa: ASYNC110 (the reply is a file: we poll)
                await anyio.sleep(0.01)
        tg.cancel_scope.cancel()
    return reply


@pytest.mark.anyio
async def test_the_holder_carries_out_requests_and_answers_refusals_without_stopping(tmp_path: Path) -> None:
    box = Mailbox(tmp_path / "requests")
    done: list[str] = []

    async def cancel(r: Request) -> str:
        done.append(r.args["run"])
        return f"cancelled {r.args['run']}"

    async def refuse(r: Request) -> str:
        raise ControlError(f"{r.args['run']} is already COMPLETED; nothing to cancel")

    async def fenced(r: Request) -> str:
        raise NotLeader("the lease was taken over by login2:9 (generation 4)")

    async def broken(r: Request) -> str:
        raise RuntimeError("boom")

    table = {"cancel": cancel, "refuse": refuse, "fenced": fenced, "broken": broken}
    ok = await serve_until_answered(box, table, Request.new("cancel", {"run": RUN}, "cli:a", 60, "x:1"))
    assert ok == Reply(True, f"cancelled {RUN}", "login1:1, generation 3")
    no = await serve_until_answered(box, table, Request.new("refuse", {"run": RUN}, "cli:a", 60, "x:1"))
    assert not no.ok and "already COMPLETED" in no.message
    lost = await serve_until_answered(box, table, Request.new("fenced", {}, "cli:a", 60, "x:1"))
    assert not lost.ok and "lost the lease" in lost.message
    bad = await serve_until_answered(box, table, Request.new("broken", {}, "cli:a", 60, "x:1"))
    assert not bad.ok and "RuntimeError: boom" in bad.message
    unknown = await serve_until_answered(box, table, Request.new("reboot", {}, "cli:a", 60, "x:1"))
    assert not unknown.ok and "unknown command 'reboot'" in unknown.message
    missing = await serve_until_answered(box, table, Request.new("cancel", {}, "cli:a", 60, "x:1"))
    assert not missing.ok and "missing argument" in missing.message
    expired = await serve_until_answered(
        box, table, Request.new("cancel", {"run": "late"}, "cli:a", -1, "x:1")
    )
    assert not expired.ok and "nothing done" in expired.message
    assert done == [RUN]  # neither the expired request nor the one without its argument did anything


# ---- the asker: who acts ---------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_with_a_live_daemon_the_cli_hands_the_command_over_and_never_takes_the_lease(
    tmp_path: Path,
) -> None:
    s = settings(tmp_path)
    daemon = holder_lease(s)
    seen: list[tuple[str, str]] = []

    async def cancel(r: Request) -> str:
        daemon.fence(0.1)  # the daemon's own fenced action
        seen.append((r.verb, r.actor))
        return f"cancelled {r.args['run']}"

    async with anyio.create_task_group() as tg:
        tg.start_soon(
            lambda: serve(Mailbox(s.requests_dir), {"cancel": cancel}, who=lambda: "d", poll_s=0.02)
        )
        tg.start_soon(lambda: daemon.keep(lambda why: None))
        message = await ask(s, "cancel", {"run": RUN}, "cli:alice")
        tg.cancel_scope.cancel()
    assert message == f"cancelled {RUN}"
    assert seen == [("cancel", "cli:alice")]
    rec = read_lease(s.lease_dir)
    assert rec is not None and (rec.pid, rec.generation) == (4242, 1)  # the CLI never held it


@pytest.mark.anyio
async def test_a_live_daemon_whose_clock_looks_stale_is_still_asked_not_bypassed(tmp_path: Path) -> None:
    s = settings(tmp_path)
    daemon = holder_lease(s, wall_offset=-3600.0)  # its records say "renewed an hour ago"
    async with anyio.create_task_group() as tg:
        tg.start_soon(
            lambda: serve(
                Mailbox(s.requests_dir), {"hold": lambda r: _ok("held")}, who=lambda: "d", poll_s=0.02
            )
        )
        tg.start_soon(lambda: daemon.keep(lambda why: None))
        assert await ask(s, "hold", {"run": RUN}, "cli:alice") == "held"
        tg.cancel_scope.cancel()
    rec = read_lease(s.lease_dir)
    assert rec is not None and rec.generation == 1  # seen renewing: it was never taken over


async def _ok(text: str) -> str:
    return text


@pytest.mark.anyio
async def test_a_daemon_that_does_not_answer_leaves_the_request_withdrawn_and_nothing_done(
    tmp_path: Path,
) -> None:
    s = settings(tmp_path, wait_s=0.5)
    daemon = holder_lease(s)
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: daemon.keep(lambda why: None))  # alive, but serves no requests
        with pytest.raises(ControlError, match="did not take the request"):
            await ask(s, "cancel", {"run": RUN}, "cli:alice")
        tg.cancel_scope.cancel()
    assert not any(s.requests_dir.glob("*.json"))  # a daemon that wakes up later finds nothing to do


@pytest.mark.anyio
async def test_with_no_daemon_the_cli_acts_itself_under_the_lease_and_releases_it(tmp_path: Path) -> None:
    s = settings(tmp_path)
    with_run(s)
    message = await ask(s, "cancel", {"run": RUN}, "cli:alice")
    assert message == f"cancelled {RUN}"
    assert run_state(s) == RunState.CANCELLED
    rec = read_lease(s.lease_dir)
    assert (
        rec is not None and rec.pid == os.getpid() and rec.released
    )  # a daemon starting now takes it at once


@pytest.mark.anyio
async def test_after_a_clean_stop_the_cli_takes_the_next_generation(tmp_path: Path) -> None:
    s = settings(tmp_path)
    with_run(s)
    daemon = holder_lease(s)
    daemon.release()
    assert await ask(s, "hold", {"run": RUN}, "cli:alice") == (
        f"held {RUN}: its first submission waits; `shepherd release {RUN}` submits it"
    )
    rec = read_lease(s.lease_dir)
    assert rec is not None and rec.generation == 2 and rec.released


@pytest.mark.anyio
async def test_a_dead_holder_is_watched_for_the_ttl_before_the_cli_acts(tmp_path: Path) -> None:
    s = settings(tmp_path)
    with_run(s)
    LeaseFolder(s.lease_dir).create(
        LeaseRecord(1, 1, "login1", 4242, "n", s.lease.ttl_s, time.time() - 600, time.time() - 900)
    )
    assert (await ask(s, "cancel", {"run": RUN}, "cli:alice")).startswith(f"cancelled {RUN}")
    rec = read_lease(s.lease_dir)
    assert rec is not None and rec.generation == 2 and run_state(s) == RunState.CANCELLED


@pytest.mark.anyio
async def test_a_refusal_is_the_cli_error_and_changes_nothing(tmp_path: Path) -> None:
    s = settings(tmp_path)
    with_run(s)
    with pytest.raises(ControlError, match="no run"):
        await ask(s, "cancel", {"run": "nope"}, "cli:alice")
    assert run_state(s) == RunState.QUEUED


@pytest.mark.anyio
async def test_a_state_folder_that_cannot_be_used_is_a_clear_error(tmp_path: Path) -> None:
    s = settings(tmp_path)
    s.lease_dir.parent.mkdir(parents=True, exist_ok=True)
    s.lease_dir.write_text("not a folder")  # the lease folder is a file: every look at it fails
    with pytest.raises(ControlError, match="cannot be used"):
        await ask(s, "cancel", {"run": RUN}, "cli:alice")


@pytest.mark.anyio
async def test_a_resume_by_hand_records_who_so_the_policy_counts_afresh(tmp_path: Path) -> None:
    s = settings(tmp_path)
    with_run(s)
    store = Store(s.db_path)
    try:
        store.set_run_state(RUN, RunState.GAVE_UP, reason="retry budget spent")
        await Controller(store, slurm=None).resume(RUN, "latest", "slack:U123")  # type: ignore[arg-type]
        run = store.get_run(RUN)
        assert run is not None and run.state == RunState.BACKOFF
        assert AttemptOverrides.from_dict(run.next_attempt).resumed_by == "slack:U123"
    finally:
        store.close()
