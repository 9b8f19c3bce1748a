"""People's commands from any login node reach the one process that may act, the lease holder, as files in
the shared state folder: so a CLI never runs sbatch/scancel/hold or writes the store beside a live daemon.

Why files and not a socket: the CLI may run on another login node than the daemon, and the state folder is
the one thing both are guaranteed to share (the lease lives there too). The protocol, each step one atomic
operation the filesystem's server decides:

- the asker writes `<id>.json` whole (a temporary file linked into place, as the lease does);
- the holder takes it by renaming it to `<id>.taken` (at most one rename wins), acts, writes `<id>.reply`
  the same way, and removes `<id>.taken`;
- an asker that gives up withdraws by unlinking `<id>.json`: if that fails, the holder has taken it and will
  act, and the asker says so. A request also carries its deadline (the asker's wall clock), after which the
  holder refuses it: a request left behind by a killed CLI is never carried out hours later.

When no daemon holds the lease (none runs, or it stopped cleanly), the CLI does not act unfenced either: it
takes the lease itself (`ask`), acts with the daemon's own fenced Slurm client and guarded store, and releases
it, so a daemon starting meanwhile stands by for the second that takes.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import sqlite3
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import anyio
import structlog

from supervisor.act.adopt import adopt
from supervisor.act.checkpoints import resolve_checkpoint_for_run
from supervisor.act.control import Controller
from supervisor.domain.boundedjson import InputRefused, loads_bounded
from supervisor.domain.spec import check_spec_files, load_spec
from supervisor.domain.yamlpos import YamlDocumentError
from supervisor.lease import Lease, NotLeader
from supervisor.lease.model import looks_held
from supervisor.notify.silences import RULE_PREFIX, Silences
from supervisor.ports import ControlError
from supervisor.settings import Settings
from supervisor.slurm.client import SlurmClient, SlurmError
from supervisor.store import Store

log = structlog.get_logger(__name__)

MAX_REQUEST_BYTES = 16 * 1024  # a verb, a run id, a path: far less; anything bigger is not ours
STALE_S = 3600.0  # replies nobody collected and leftovers of a holder that died mid-request
_ID = re.compile(r"^[A-Za-z0-9_.-]{1,80}$")
_REQUEST = re.compile(r"^([A-Za-z0-9_.-]{1,80})\.json$")


@dataclass(frozen=True, slots=True)
class Request:
    """One command for the lease holder: `verb` with its `args`, on behalf of `actor`, valid until
    `deadline` (wall clock)."""

    id: str
    verb: str
    args: dict[str, str]
    actor: str
    deadline: float
    asked_from: str = ""  # host:pid, for the holder's log

    @classmethod
    def new(cls, verb: str, args: Mapping[str, str], actor: str, wait_s: float, asked_from: str) -> Request:
        rid = f"{int(time.time())}-{secrets.token_hex(6)}"
        return cls(rid, verb, dict(args), actor, time.time() + wait_s, asked_from)

    @classmethod
    def parse(cls, rid: str, raw: bytes) -> Request:
        """The request in file `<rid>.json`; InputRefused says what is wrong with it."""
        data: Any = loads_bounded(raw, what=f"request {rid}", max_bytes=MAX_REQUEST_BYTES, max_depth=3)
        if not isinstance(data, dict):
            raise InputRefused(f"request {rid}: not a JSON object")
        args = data.get("args", {})
        if not isinstance(args, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in args.items()
        ):
            raise InputRefused(f"request {rid}: args must map names to strings")
        try:
            return cls(
                id=rid,
                verb=str(data["verb"]),
                args=args,
                actor=str(data["actor"]),
                deadline=float(data["deadline"]),
                asked_from=str(data.get("asked_from", "")),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise InputRefused(f"request {rid}: {exc!r} is missing or malformed") from exc


@dataclass(frozen=True, slots=True)
class Reply:
    ok: bool
    message: str
    by: str = ""  # host:pid (generation N) of the holder that answered


class Mailbox:
    """The request folder (`<state>/requests`): both sides of the protocol above."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def _write_whole(self, name: str, text: str) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        tmp = self.folder / f".tmp-{secrets.token_hex(6)}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, text.encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(tmp, self.folder / name)
        finally:
            os.unlink(tmp)

    # ---- the asker (the CLI) ------------------------------------------------------------------------------
    def post(self, req: Request) -> None:
        body = {k: v for k, v in asdict(req).items() if k != "id"}
        self._write_whole(f"{req.id}.json", json.dumps(body, sort_keys=True))

    def reply(self, rid: str) -> Reply | None:
        """The holder's answer, once it is there (opening the file revalidates it on NFS)."""
        try:
            raw = (self.folder / f"{rid}.reply").read_bytes()
        except FileNotFoundError:
            return None
        try:
            data: Any = loads_bounded(raw, what=f"reply {rid}", max_bytes=MAX_REQUEST_BYTES * 4)
            return Reply(bool(data["ok"]), str(data["message"]), str(data.get("by", "")))
        except (InputRefused, KeyError, TypeError, ValueError) as exc:
            return Reply(False, f"the daemon's reply could not be read: {exc}")

    def collect(self, rid: str) -> None:
        try:
            os.unlink(self.folder / f"{rid}.reply")
        except FileNotFoundError:
            pass

    def withdraw(self, rid: str) -> bool:
        """True if withdrawn before the holder took it; False if it was taken (the holder will act)."""
        try:
            os.unlink(self.folder / f"{rid}.json")
            return True
        except FileNotFoundError:
            return False

    # ---- the holder (the daemon) --------------------------------------------------------------------------
    def take(self) -> list[tuple[str, Request | InputRefused]]:
        """Every request waiting, oldest name first, each claimed by renaming it (a lost rename: another
        process took it). A request that cannot be read comes back as the reason, to be answered as such."""
        try:
            names = sorted(e.name for e in os.scandir(self.folder))
        except FileNotFoundError:
            return []
        out: list[tuple[str, Request | InputRefused]] = []
        for name in names:
            m = _REQUEST.match(name)
            if m is None:
                continue
            rid = m.group(1)
            taken = self.folder / f"{rid}.taken"
            try:
                os.rename(self.folder / name, taken)
                raw = taken.read_bytes()
            except FileNotFoundError:
                continue  # withdrawn, or taken by someone else
            except OSError as exc:
                out.append((rid, InputRefused(f"request {rid}: cannot be read: {exc}")))
                continue
            try:
                out.append((rid, Request.parse(rid, raw)))
            except InputRefused as exc:
                out.append((rid, exc))
        return out

    def answer(self, rid: str, reply: Reply) -> None:
        if not _ID.fullmatch(rid):
            return
        self._write_whole(f"{rid}.reply", json.dumps(asdict(reply), sort_keys=True))
        try:
            os.unlink(self.folder / f"{rid}.taken")
        except FileNotFoundError:
            pass

    def sweep(self, now: float) -> None:
        """Remove replies nobody collected and leftovers older than STALE_S (best effort)."""
        try:
            entries = list(os.scandir(self.folder))
        except OSError:
            return
        for e in entries:
            if e.name.endswith((".reply", ".taken")) or e.name.startswith(".tmp-"):
                try:
                    if now - e.stat().st_mtime > STALE_S:
                        os.unlink(e.path)
                except OSError:
                    pass


# What the holder does for each verb: the same Controller the Slack commands use, behind this one table.
Handler = Callable[[Request], Awaitable[str]]

POLL_S = 0.5  # a person waits on the answer: half a second is quick; listing a tiny folder is cheap


async def serve(
    mailbox: Mailbox,
    handlers: Mapping[str, Handler],
    *,
    who: Callable[[], str],
    clock: Callable[[], float] = time.time,
    poll_s: float = POLL_S,
) -> None:
    """The lease holder's loop: take each request, carry it out through `handlers`, answer it.

    A refusal (ControlError, SlurmError) is the answer; anything else is logged and answered as an internal
    error. Nothing a request holds stops the loop. `who` names this holder in each reply.
    """
    swept = 0.0
    while True:
        for rid, req in await anyio.to_thread.run_sync(mailbox.take):
            reply = await _carry_out(rid, req, handlers, clock)
            await anyio.to_thread.run_sync(mailbox.answer, rid, Reply(reply.ok, reply.message, who()))
        if clock() - swept > 60:
            swept = clock()
            await anyio.to_thread.run_sync(mailbox.sweep, swept)
        await anyio.sleep(poll_s)


async def _carry_out(
    rid: str,
    req: Request | InputRefused,
    handlers: Mapping[str, Handler],
    clock: Callable[[], float],
) -> Reply:
    if isinstance(req, InputRefused):
        log.warning("request refused", request=rid, reason=str(req))
        return Reply(False, str(req))
    handler = handlers.get(req.verb)
    if handler is None:
        return Reply(False, f"unknown command {req.verb!r}; this daemon knows {', '.join(sorted(handlers))}")
    if clock() > req.deadline:
        log.warning("request expired before it was taken", request=rid, verb=req.verb, asker=req.asked_from)
        return Reply(False, f"{req.verb}: the request arrived after its asker stopped waiting; nothing done")
    log.info("request", request=rid, verb=req.verb, args=req.args, actor=req.actor, asked_from=req.asked_from)
    try:
        return Reply(True, await handler(req))
    except ControlError as exc:
        return Reply(False, str(exc))
    except (KeyError, ValueError) as exc:  # a request written by hand, without an argument its verb needs
        return Reply(False, f"{req.verb}: bad or missing argument {exc}")
    except SlurmError as exc:  # Fenced included: this daemon lost its lease; nothing was run
        return Reply(False, f"slurm: {exc}")
    except NotLeader as exc:
        return Reply(False, f"not done: this daemon lost the lease ({exc}); ask again")
    except Exception as exc:
        log.exception("request failed", request=rid, verb=req.verb)
        return Reply(False, f"{req.verb} failed inside the daemon: {type(exc).__name__}: {exc}")


VERBS = ("cancel", "hold", "release", "resume", "give-up", "silence", "adopt")


def handlers(controller: Controller, settings: Settings, slurm: SlurmClient) -> dict[str, Handler]:
    """What the CLI's verbs do once they reach the process that may act: `controller` (the Slack commands'
    code path), the silences table, and adoption of a hand-submitted job."""
    c = controller

    async def silence(r: Request) -> str:
        target = r.args["target"]
        if not target.startswith(RULE_PREFIX):
            target = c.find(target).id
        until = Silences(c.store.db).add(target, float(r.args["seconds"]), r.actor)
        return f"silenced {target} until {time.strftime('%Y-%m-%d %H:%M', time.localtime(until))}"

    async def adopt_job(r: Request) -> str:
        path = Path(r.args["spec"])
        try:
            spec = load_spec(path, base=path.parent)  # the CLI sent the path resolved
        except (YamlDocumentError, OSError) as exc:
            raise ControlError(f"invalid spec:\n{exc}") from exc
        problems = check_spec_files(spec)
        if problems:
            raise ControlError("invalid spec:\n" + "\n".join(f"{path}: {p}" for p in problems))
        run, notes = await adopt(c.store, slurm, settings, r.args["job_id"], spec, path)
        return "\n".join([run.id, *notes])  # the run id first: the CLI prints it alone on stdout

    return {
        "cancel": lambda r: c.cancel(r.args["run"], r.actor),
        "hold": lambda r: c.hold(r.args["run"], r.actor),
        "release": lambda r: c.release(r.args["run"], r.actor),
        "resume": lambda r: c.resume(
            r.args["run"], r.args.get("checkpoint", "latest"), r.actor, sets=request_sets(r)
        ),
        "give-up": lambda r: c.give_up(r.args["run"], r.actor),
        "silence": silence,
        "adopt": adopt_job,
    }


def request_sets(r: Request) -> list[str]:
    """A resume's `--set KEY=VALUE` list, carried as one JSON text (a request's args are strings)."""
    sets: Any = json.loads(r.args.get("sets") or "[]")
    if not isinstance(sets, list) or not all(isinstance(x, str) for x in sets):
        raise ValueError("sets must be a JSON list of KEY=VALUE strings")
    return sets


def make_lease(settings: Settings) -> Lease:
    """The root's lease with its settings, for the daemon and for a CLI that finds no daemon holding it."""
    s = settings.lease
    return Lease(settings.lease_dir, ttl_s=s.ttl_s, margin_s=s.margin_s, renew_every_s=s.renew_every_s)


ASK_POLL_S = 0.2


async def ask(
    settings: Settings,
    verb: str,
    args: Mapping[str, str],
    actor: str,
    *,
    lease: Lease | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> str:
    """Carry out `verb` where it may be done, and return what was done (ControlError: refused, or not done).

    A live lease holder gets it through the mailbox. Otherwise this process takes the lease (at once when it
    is free or released; after watching a silent holder for the ttl, as a standby would) and acts under it. A
    holder counts as live when its last renewal looks recent by the wall clock, or when this process sees it
    renew (so a skewed clock cannot make the CLI act beside a live daemon: it can only make it wait).
    """
    try:
        return await _ask(settings, verb, args, actor, lease or make_lease(settings), clock)
    except (OSError, sqlite3.Error) as exc:
        raise ControlError(f"not done: the state folder {settings.state_dir} cannot be used: {exc}") from exc


async def _ask(
    settings: Settings,
    verb: str,
    args: Mapping[str, str],
    actor: str,
    lease: Lease,
    clock: Callable[[], float],
) -> str:
    mailbox = Mailbox(settings.requests_dir)
    wait_s = settings.lease.request_wait_s
    give_up_at = clock() + wait_s + settings.lease.ttl_s  # a silent holder is watched for the ttl first
    first_seq: int | None = None
    while True:
        why = await anyio.to_thread.run_sync(lease.try_acquire)
        if why is None:
            try:
                return await _act_here(settings, lease, verb, args, actor)
            finally:
                await anyio.to_thread.run_sync(lease.release)
        seq, record = await anyio.to_thread.run_sync(lease.folder.newest)
        if first_seq is None:
            first_seq = seq
        if looks_held(record, time.time()) or seq != first_seq:
            reply = await _through_holder(mailbox, lease, verb, args, actor, wait_s, clock)
            if reply is None:  # the holder released the lease before taking the request: look again
                first_seq = None
                continue
            if not reply.ok:
                raise ControlError(reply.message)
            return reply.message
        if clock() > give_up_at:
            raise ControlError(f"not done: the lease is {why}, and it could not be taken in {wait_s:.0f} s")
        await anyio.sleep(ASK_POLL_S)


async def _through_holder(
    mailbox: Mailbox,
    lease: Lease,
    verb: str,
    args: Mapping[str, str],
    actor: str,
    wait_s: float,
    clock: Callable[[], float],
) -> Reply | None:
    """Post the request and wait for the holder's reply; None if the lease was released meanwhile and the
    request withdrawn untouched (the caller looks again)."""
    req = Request.new(verb, args, actor, wait_s, f"{lease.host}:{lease.pid}")
    await anyio.to_thread.run_sync(mailbox.post, req)
    deadline = clock() + wait_s
    while True:
        reply = await anyio.to_thread.run_sync(mailbox.reply, req.id)
        if reply is not None:
            await anyio.to_thread.run_sync(mailbox.collect, req.id)
            return reply
        _, record = await anyio.to_thread.run_sync(lease.folder.newest)
        released = record is not None and record.released
        if (released or clock() > deadline) and await anyio.to_thread.run_sync(mailbox.withdraw, req.id):
            if released:
                return None
            raise ControlError(
                f"not done: the daemon holding the lease ({_holder(record)}) did not take the request "
                f"within {wait_s:.0f} s"
            )
        if clock() > deadline + wait_s:
            raise ControlError(
                f"the daemon ({_holder(record)}) took the request but has not answered in "
                f"{2 * wait_s:.0f} s; it may still carry it out: see `shepherd status`"
            )
        await anyio.sleep(ASK_POLL_S)


def _holder(record: Any) -> str:
    return f"{record.holder}, generation {record.generation}" if record is not None else "unknown"


async def _act_here(settings: Settings, lease: Lease, verb: str, args: Mapping[str, str], actor: str) -> str:
    """Carry out `verb` in this process, which holds the lease: the same handlers the daemon runs, with the
    store guarded and Slurm fenced by the lease, exactly as the daemon's are."""
    if not settings.db_path.exists():
        settings.ensure_dirs()
    store = Store(settings.db_path, write_guard=lease.guard)
    try:
        slurm = SlurmClient(
            timeout_s=settings.slurm.command_timeout_s, bin_dir=settings.slurm.bin_dir, fence=lease.fence
        )
        controller = Controller(store, slurm, resolve_checkpoint=resolve_checkpoint_for_run)
        table = handlers(controller, settings, slurm)
        req = Request.new(verb, args, actor, settings.lease.request_wait_s, f"{lease.host}:{lease.pid}")
        reply = await _carry_out(req.id, req, table, time.time)
    finally:
        store.close()
    if not reply.ok:
        raise ControlError(reply.message)
    return reply.message
