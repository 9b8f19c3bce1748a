"""Which watched files changed: inotify where it works, polling where it cannot.

inotify only reports changes made through the local kernel, so writes by
compute nodes to NFS/Lustre/GPFS/... never show up on the login node running
the daemon. Paths on such filesystems (detected with statfs, falling back to
/proc/self/mountinfo for FUSE subtypes) are polled instead: open + fstat per
file, because a plain stat on NFS may return attributes cached for up to a
minute while an open revalidates them (close-to-open consistency).

Only the files and folders of active runs are watched (each poll is metadata
load on a parallel filesystem); `add`/`remove` change the set at runtime, and
the paths of a pending job are paused. A watched path that does not exist yet
is fine: inotify watches its nearest existing ancestor until it appears,
polling just sees it appear. What is polled when, within a budget of
operations per second, is `pollplan.PollPlan`'s decision; the calls
themselves go through an `FsProbe` (a counting fake in tests). A folder is
opened and fstat'ed first and listed only when its mtime moved (names only,
no stat per entry).

Latency: watchfiles' default 1.6 s debounce would eat the whole latency
budget, so it runs with a 50 ms debounce and a 10 ms step; the poller wakes
when the plan says the next check is due.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import dataclasses
import errno
import math
import os
import struct
import time
from collections import Counter
from collections.abc import Callable, Hashable
from contextlib import aclosing
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Literal, Protocol

import anyio
import anyio.lowlevel
import structlog
import watchfiles
from anyio.abc import TaskGroup, TaskStatus

from supervisor.watch.pollplan import Cadence, Kind, PollLoad, PollPlan

log = structlog.get_logger(__name__)

# statfs(2) f_type magics of filesystems where other hosts write (linux/magic.h, statfs(2), vendors' sources).
SHARED_FS_MAGIC: dict[int, str] = {
    0x6969: "nfs",
    0x517B: "smbfs",
    0xFF534D42: "cifs",
    0xFE534D42: "smb2",
    0x0BD00BD0: "lustre",
    0x47504653: "gpfs",
    0x19830326: "beegfs",
    0x00C36400: "ceph",
    0x65735546: "fuse",  # glusterfs, sshfs, juicefs, s3fs, gcsfuse, weka's fuse client, virtiofs...
    0x01021997: "9p",
    0x5346414F: "afs",  # OpenAFS
    0x6B414653: "kafs",
    0x73757245: "coda",
    0x7461636F: "ocfs2",
    0x01161970: "gfs2",
    0xAAD7AAEA: "panfs",
    0x20030528: "orangefs",
    0x6E667364: "nfsd",
    0x013111A8: "ibrix",
}
SHARED_FS_NAMES = frozenset(
    {
        "nfs",
        "nfs4",
        "cifs",
        "smb3",
        "smbfs",
        "lustre",
        "gpfs",
        "beegfs",
        "ceph",
        "9p",
        "afs",
        "ocfs2",
        "gfs2",
        "panfs",
        "pvfs2",
        "orangefs",
        "wekafs",
        "glusterfs",
        "virtiofs",
        "cvmfs",
        "davfs",
        "nfsd",
        "vboxsf",
    }
)
# FUSE filesystems where every write goes through this kernel, so inotify sees them.
LOCAL_FUSE = frozenset({"fuse-overlayfs", "fuse.fuse-overlayfs", "lxcfs", "fuse.lxcfs", "fuse.portal"})

Mode = Literal["inotify", "poll"]


@dataclass(frozen=True, slots=True)
class FsInfo:
    magic: int | None
    name: str
    shared: bool


def _statfs_magic(path: str) -> int | None:
    """f_type from libc statfs; None where that is unavailable (non-Linux, odd libc)."""
    libc = _libc()
    if libc is None:
        return None
    buf = ctypes.create_string_buffer(512)  # struct statfs is 120 bytes on x86_64/aarch64
    if libc.statfs(os.fsencode(path), buf) != 0:
        return None
    (f_type,) = struct.unpack_from("l", buf.raw)  # __fsword_t, a native long, first member
    return int(f_type) & 0xFFFFFFFF


_LIBC: ctypes.CDLL | Literal[False] | None = False


def _libc() -> ctypes.CDLL | None:
    global _LIBC
    if _LIBC is False:
        try:
            lib = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
            lib.statfs.argtypes = [ctypes.c_char_p, ctypes.c_void_p]
            lib.statfs.restype = ctypes.c_int
            _LIBC = lib
        except (OSError, AttributeError):
            _LIBC = None
    return _LIBC


def _mount_fstype(path: str, mountinfo: str = "/proc/self/mountinfo") -> str | None:
    """The fstype of the mount holding `path` (longest mount point prefix), e.g. `fuse.sshfs`."""
    best, best_len = None, -1
    try:
        with open(mountinfo, encoding="utf-8", errors="replace") as fh:
            for row in fh:
                left, _, right = row.partition(" - ")
                fields = left.split()
                if len(fields) < 5 or not right:
                    continue
                mnt = fields[4].replace("\\040", " ")
                if (path == mnt or path.startswith(mnt.rstrip("/") + "/")) and len(mnt) > best_len:
                    best, best_len = right.split()[0], len(mnt)
    except OSError:
        return None
    return best


def existing_ancestor(path: str | Path) -> Path:
    p = Path(os.path.abspath(path))
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def detect_fs(path: str | Path) -> FsInfo:
    """What filesystem holds `path` (or, if missing, its nearest existing ancestor), and is it shared."""
    real = os.path.realpath(existing_ancestor(path))
    magic = _statfs_magic(real)
    fstype = _mount_fstype(real)
    if fstype is not None and (fstype in LOCAL_FUSE or fstype.split(".")[-1] in LOCAL_FUSE):
        return FsInfo(magic, fstype, False)
    if magic is not None and magic in SHARED_FS_MAGIC:
        return FsInfo(magic, fstype or SHARED_FS_MAGIC[magic], True)
    if fstype is not None:
        base = fstype.split(".", 1)[1] if fstype.startswith("fuse.") else fstype
        shared = fstype in SHARED_FS_NAMES or base in SHARED_FS_NAMES or fstype.startswith("fuse")
        return FsInfo(magic, fstype, shared)
    return FsInfo(magic, "unknown", False)


# ---- signatures -----------------------------------------------------------------------------------------
FileSig = tuple[int, int, int] | None  # (inode, size, mtime_ns), None when missing
DirSig = dict[str, tuple[int, int, int]]


def file_signature(path: str) -> FileSig:
    """open + fstat rather than stat: on NFS the open revalidates the attribute cache."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.EACCES):
            return None
        raise
    try:
        st = os.fstat(fd)
    finally:
        os.close(fd)
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def dir_signature(path: str) -> DirSig | None:
    try:
        out: DirSig = {}
        with os.scandir(path) as entries:
            for e in entries:
                try:
                    st = e.stat(follow_symlinks=False)
                except OSError:
                    continue
                out[e.name] = (st.st_ino, st.st_size, st.st_mtime_ns)
        return out
    except (FileNotFoundError, NotADirectoryError):
        return None


# ---- polling's filesystem calls ----------------------------------------------------------------------------
# What the budget counts as one operation: a call that makes the filesystem look a path up or read a folder
# (open, stat by path, one getdents pass), the ones that reach NFS/Lustre/GPFS metadata servers. The fstat
# and close that come with an open, and reads of a file's new bytes, are not counted: fstat is answered from
# the attributes the open just revalidated, and data goes to data servers.
FILE_CHECK_OPS = 1  # open (+ fstat, close)
LISTING_OPS = 2  # os.listdir makes two getdents calls (the second one sees the end)
RACY_S = 3.0  # a folder mtime this recent may hide a later change in the same clock tick: list again


@dataclass(frozen=True, slots=True)
class Folder:
    """A folder's entry names as last listed, and the stamp (inode, mtime) that listing goes with."""

    stamp: tuple[int, int]
    names: frozenset[str]
    trusted: bool  # the mtime was old enough when listed that an unchanged one means no new entries


class FsProbe(Protocol):
    """The filesystem calls polling makes; `ops` counts them by kind ("open" of a file, "folder_open",
    "listing": getdents passes)."""

    ops: Counter[str]

    def file(self, path: str) -> FileSig: ...

    def folder(self, path: str, last: Folder | None) -> Folder | None: ...


class OsProbe:
    """The real calls: open + fstat for a file (close-to-open: on NFS the open revalidates the attributes a
    stat may serve from a cache for up to a minute); open + fstat for a folder, listed only when its mtime
    moved, or when the last listing was too close to the mtime to trust it (1 s mtime granularity on some
    servers, like git's "racy" index entries)."""

    def __init__(self, *, clock: Callable[[], float] = time.time, racy_s: float = RACY_S) -> None:
        self.ops: Counter[str] = Counter()
        self.clock = clock
        self.racy_s = racy_s

    def file(self, path: str) -> FileSig:
        self.ops["open"] += 1
        return file_signature(path)

    def folder(self, path: str, last: Folder | None) -> Folder | None:
        self.ops["folder_open"] += 1
        try:
            fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except (FileNotFoundError, NotADirectoryError):
            return None
        try:
            st = os.fstat(fd)  # before listing: an entry made meanwhile moves the mtime past this stamp
            stamp = (st.st_ino, st.st_mtime_ns)
            if last is not None and last.trusted and last.stamp == stamp:
                return last
            self.ops["listing"] += LISTING_OPS
            names = frozenset(os.listdir(fd))
        finally:
            os.close(fd)
        return Folder(stamp, names, self.clock() - st.st_mtime_ns / 1e9 > self.racy_s)


_UNSEEN: FileSig = (-1, -1, -1)  # a polled file not checked yet: its first check reports it if it exists


@dataclass(slots=True)
class _Watched:
    path: str
    mode: Mode
    is_dir: bool
    sig: FileSig = None
    dsig: DirSig | None = None
    folder: Folder | None = None  # polled folders: the last listing
    seen: bool = False  # polled folders: checked once


class ChangeSource:
    """Async source of sets of changed paths (a watched file, or an entry of a watched folder).

    Use as `async with ChangeSource(...) as src: async for paths in src: ...`, or start
    `src.run` in your own task group and iterate. Folders are watched one level deep.
    """

    def __init__(
        self,
        *,
        poll_interval_s: float = 2.0,
        force_polling: bool = False,
        debounce_ms: int = 50,
        step_ms: int = 10,
        detect: Callable[[str | Path], FsInfo] = detect_fs,
        cadence: Cadence | None = None,
        probe: FsProbe | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        """`cadence` (default: `poll_interval_s` as the base interval, the plan's other defaults) says how
        often polled paths are looked at and how many operations per second that may cost."""
        self.force_polling = force_polling
        self.debounce_ms = debounce_ms
        self.step_ms = step_ms
        self.detect = detect
        self.clock = clock
        self.wall = wall  # the clock of files' mtimes: how long a file seen at its first check was quiet
        self.probe: FsProbe = probe if probe is not None else OsProbe()
        self.plan = PollPlan(cadence or Cadence.scaled(poll_interval_s), clock())
        self._watched: dict[str, _Watched] = {}
        self._send, self._recv = anyio.create_memory_object_stream[set[str]](max_buffer_size=math.inf)
        self._wake_inotify = anyio.Event()
        self._wake_poll = anyio.Event()
        self._stop_current: anyio.Event | None = None
        self._tg: TaskGroup | None = None
        self._current_roots: frozenset[str] = frozenset()

    @property
    def poll_interval_s(self) -> float:
        """The base interval of polled paths (a changed file is looked at again after this)."""
        return self.plan.cadence.base_s

    @poll_interval_s.setter
    def poll_interval_s(self, value: float) -> None:
        """A new base interval; the other intervals keep their values unless they would fall below it."""
        c = self.plan.cadence
        self.set_cadence(
            dataclasses.replace(
                c,
                base_s=value,
                max_s=max(c.max_s, value),
                listing_s=max(c.listing_s, value),
                progress_s=max(c.progress_s, value),
                max_listing_s=max(c.max_listing_s, value),
            )
        )

    def set_cadence(self, cadence: Cadence) -> None:
        self.plan.set_cadence(cadence, self.clock())
        self._wake_poll.set()

    # ---- the watched set ------------------------------------------------------------------------------
    def classify(self, path: str | Path) -> Mode:
        """How `path` would be watched: polled on a shared filesystem (or when forced), else inotify."""
        return "poll" if self.force_polling or self.detect(os.path.abspath(path)).shared else "inotify"

    def add(
        self,
        path: str | Path,
        *,
        is_dir: bool = False,
        mode: Mode | None = None,
        group: Hashable = None,
        progress: bool = False,
    ) -> Mode:
        """Watch a file (or, with is_dir, a folder's entries); it need not exist yet.

        `mode` overrides the filesystem's verdict (a run whose folders are partly on a shared filesystem is
        polled as a whole); `group` names the run the path belongs to, for `pause`/`resume`; a `progress`
        file (status.json, metrics, TensorBoard) is polled on its own slower cadence.
        """
        key = os.path.abspath(path)
        if key in self._watched:
            return self._watched[key].mode
        mode = mode or self.classify(key)
        w = _Watched(key, mode, is_dir)
        if mode == "poll":
            # no I/O here: the first check (soon, within the budget) reports the path if it exists
            w.sig = _UNSEEN
            kind: Kind = "listing" if is_dir else "progress" if progress else "file"
            self.plan.add(key, group, kind, self.clock(), cost=FILE_CHECK_OPS)
            self._wake_poll.set()
        elif is_dir:
            w.dsig = dir_signature(key)
        else:
            w.sig = file_signature(key)
        self._watched[key] = w
        log.debug("watching", path=key, mode=mode)
        if mode == "inotify":
            self._reroot()
        return mode

    def remove(self, path: str | Path) -> None:
        key = os.path.abspath(path)
        w = self._watched.pop(key, None)
        if w is not None and w.mode == "inotify":
            self._reroot()
        elif w is not None:
            self.plan.remove(key)

    def pause(self, group: Hashable) -> None:
        """The group's job is pending: its polled paths are not looked at (no cost) until `resume`."""
        self.plan.pause(group)

    def resume(self, group: Hashable) -> None:
        self.plan.resume(group, self.clock())
        self._wake_poll.set()

    def forget_group(self, group: Hashable) -> None:
        """The group's run is no longer watched: drop its polled paths and its pause."""
        for key in [k for k, t in self.plan.targets.items() if t.owner == group]:
            self.remove(key)
        self.plan.remove_owner(group)

    def charge(self, ops: float) -> None:
        """Operations made on polled paths outside the plan (reads after a change): paid from the budget."""
        self.plan.charge(ops, self.clock())

    def load(self) -> PollLoad:
        return self.plan.load(self.clock())

    def mode(self, path: str | Path) -> Mode | None:
        w = self._watched.get(os.path.abspath(path))
        return w.mode if w else None

    def signature(self, path: str | Path) -> FileSig:
        """A polled file's (inode, size, mtime) at its last check; None if missing or not polled."""
        w = self._watched.get(os.path.abspath(path))
        return w.sig if w is not None and w.mode == "poll" and w.sig != _UNSEEN else None

    def listing(self, path: str | Path) -> frozenset[str] | None:
        """A polled folder's entry names at its last listing (None: not listed yet, missing, not polled)."""
        w = self._watched.get(os.path.abspath(path))
        return w.folder.names if w is not None and w.folder is not None else None

    @property
    def paths(self) -> frozenset[str]:
        return frozenset(self._watched)

    def _reroot(self) -> None:
        """Restart the inotify watch if the roots changed (watchfiles takes a fixed set of paths)."""
        if self._roots() == self._current_roots:
            return
        self._wake_inotify.set()
        if self._stop_current is not None:
            self._stop_current.set()

    def _roots(self) -> frozenset[str]:
        roots = set()
        for w in self._watched.values():
            if w.mode != "inotify":
                continue
            p = Path(w.path)
            target = p if w.is_dir and p.is_dir() else p.parent
            roots.add(str(existing_ancestor(target)))
        return frozenset(roots)

    # ---- running ------------------------------------------------------------------------------------------
    async def __aenter__(self) -> ChangeSource:
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        await self._tg.start(self.run)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        assert self._tg is not None
        self._tg.cancel_scope.cancel()
        if self._stop_current is not None:
            self._stop_current.set()
        return await self._tg.__aexit__(exc_type, exc, tb)

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Both watchers; runs until cancelled."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._poll_loop)
            tg.start_soon(self._inotify_loop)
            task_status.started()

    def __aiter__(self) -> ChangeSource:
        return self

    async def __anext__(self) -> set[str]:
        changed = set(await self._recv.receive())
        while True:
            try:
                changed |= self._recv.receive_nowait()
            except anyio.WouldBlock:
                return changed

    def _emit(self, paths: set[str]) -> None:
        if paths:
            self._send.send_nowait(paths)

    # ---- polling ---------------------------------------------------------------------------------------
    def sweep(self, mode: Mode | None = None) -> set[str]:
        """Compare every watched inotify path with its last signature; update and return the changed.

        Polled paths are looked at by `poll_due`, when the plan says so, never all at once.
        """
        changed: set[str] = set()
        for w in list(self._watched.values()):
            if w.mode == "poll" or (mode is not None and w.mode != mode):
                continue
            try:
                changed |= self._check(w)
            except OSError as exc:  # ESTALE, EIO on a flaky mount: keep the old signature, retry next sweep
                log.warning("could not check watched path", path=w.path, error=str(exc))
        return changed

    @staticmethod
    def _check(w: _Watched) -> set[str]:
        if w.is_dir:
            new = dir_signature(w.path)
            old = w.dsig
            if new == old:
                return set()
            w.dsig = new
            before, now = old or {}, new or {}
            names = {n for n in before.keys() | now.keys() if before.get(n) != now.get(n)}
            return {os.path.join(w.path, n) for n in names} if names else {w.path}
        sig = file_signature(w.path)
        if sig == w.sig:
            return set()
        w.sig = sig
        return {w.path}

    def poll_due(self, now: float | None = None) -> set[str]:
        """Look at the polled paths the plan says are due (within the budget); the changed paths.

        A changed file is reported as itself; a folder as its new or gone entries (itself at its first
        look). A watched path that a listing shows appearing or going is looked at in the same round.
        """
        now = self.clock() if now is None else now
        changed: set[str] = set()
        due = self._take(now)
        while due:
            found = self._probe_all(due)
            more = self._apply(found, now, changed)
            due = self._take(now) if more else []
        return changed

    def _take(self, now: float) -> list[_Watched]:
        out = []
        for key in self.plan.take(now):
            w = self._watched.get(key)
            if w is None:
                self.plan.observed(key, False, now)
            else:
                out.append(w)
        return out

    def _probe_all(self, due: list[_Watched]) -> list[tuple[_Watched, FileSig | Folder | OSError | None]]:
        return [(w, self._probe(w)) for w in due]

    def _probe(self, w: _Watched) -> FileSig | Folder | OSError | None:
        """The filesystem calls for one polled path (in a worker thread: nothing is changed here)."""
        try:
            return self.probe.folder(w.path, w.folder) if w.is_dir else self.probe.file(w.path)
        except OSError as exc:  # ESTALE, EIO on a flaky mount: retry at the next check
            return exc

    def _apply(
        self, found: list[tuple[_Watched, FileSig | Folder | OSError | None]], now: float, changed: set[str]
    ) -> bool:
        """Record what the probes saw (on the event loop), add the changes to `changed`; True when a
        listing hinted at watched paths, which the plan then puts first."""
        hinted: list[str] = []
        for w, result in found:
            got: set[str] = set()
            if isinstance(result, OSError):
                log.warning("could not check watched path", path=w.path, error=str(result))
            elif w.is_dir:
                assert not isinstance(result, tuple)
                got = self._folder_changes(w, result)
                hinted += [p for p in got if p != w.path and p in self._watched and p not in changed]
            else:
                assert not isinstance(result, Folder)
                first = w.sig == _UNSEEN
                if result != w.sig and not (first and result is None):
                    got = {w.path}  # a first check reports an existing file: the monitor reads its backlog
                w.sig = result
                if first:  # not a change for the plan: how long it has been quiet is told by its mtime
                    since = None if result is None else now - max(0.0, self.wall() - result[2] / 1e9)
                    self.plan.observed(w.path, False, now, quiet_since=since)
                    changed |= got
                    continue
            self.plan.observed(w.path, bool(got), now)
            changed |= got
        self.plan.soon(hinted, now)
        return bool(hinted)

    def _folder_changes(self, w: _Watched, new: Folder | None) -> set[str]:
        last, first = w.folder, not w.seen
        w.seen = True
        w.folder = new
        if new is not None and new is not last:
            self.plan.charge(LISTING_OPS, self.clock())  # the check paid for the open; the listing costs more
        if new is None or last is None:
            appeared_or_gone = new is not None or (last is not None and not first)
            return {w.path} if appeared_or_gone else set()
        return {os.path.join(w.path, n) for n in new.names ^ last.names}

    async def _poll_loop(self) -> None:
        while True:
            self._wake_poll = anyio.Event()
            now = self.clock()
            changed: set[str] = set()
            due: list[_Watched] = []
            try:
                due = self._take(now)
                while due:
                    found = await anyio.to_thread.run_sync(self._probe_all, due)
                    more = self._apply(found, now, changed)
                    due = self._take(now) if more else []
            except Exception as exc:  # never let one bad round stop the poller
                log.warning("polling round failed", error=str(exc))
                for w in due:  # taken but not recorded: back in the plan, or they would never be looked at
                    self.plan.observed(w.path, False, now)
            self._emit(changed)
            now = self.clock()
            delay = min(1.0, max(0.02, self.plan.next_wake(now) - now))
            with anyio.move_on_after(delay):
                await self._wake_poll.wait()

    # ---- inotify ---------------------------------------------------------------------------------------
    async def _inotify_loop(self) -> None:
        backoff = 0.0
        while True:
            self._wake_inotify = anyio.Event()
            roots = self._roots()
            self._current_roots = roots
            if not roots:
                await self._wake_inotify.wait()
                continue
            stop = anyio.Event()
            self._stop_current = stop
            watch = watchfiles.awatch(
                *roots,
                watch_filter=None,
                debounce=self.debounce_ms,
                step=self.step_ms,
                stop_event=stop,
                recursive=False,
                force_polling=False,
            )
            try:
                async with anyio.create_task_group() as tg, aclosing(watch):
                    # awatch sets its inotify watches before its first await, so this sweep (run once
                    # the loop gets there) sees whatever changed while no watch was active
                    tg.start_soon(self._sweep_soon)
                    async for changes in watch:
                        backoff = 0.0
                        self._emit(self._match({p for _, p in changes}))
                        if self._roots() != roots:
                            break
            except (OSError, RuntimeError) as exc:
                # a root vanished between computing and watching it, or the inotify watch limit is hit:
                # retry with backoff; the sweep at each start keeps reporting changes meanwhile
                backoff = min(max(backoff * 2, self.step_ms / 1000), self.poll_interval_s)
                log.debug("inotify watch restarting", error=str(exc), retry_in_s=backoff)
                await anyio.sleep(backoff)
            finally:
                stop.set()
                self._stop_current = None

    async def _sweep_soon(self) -> None:
        await anyio.lowlevel.checkpoint()
        self._emit(self.sweep("inotify"))

    def _match(self, events: set[str]) -> set[str]:
        """Events under our roots that concern a watched path (roots also see unrelated siblings)."""
        out: set[str] = set()
        for p in events:
            w = self._watched.get(p)
            if w is not None and w.mode == "inotify":
                out.add(p)
                if not w.is_dir:
                    w.sig = _quiet_signature(p)
                continue
            parent = self._watched.get(os.path.dirname(p))
            if parent is not None and parent.is_dir and parent.mode == "inotify":
                out.add(p)
        return out


def _quiet_signature(path: str) -> FileSig:
    try:
        return file_signature(path)
    except OSError:
        return None
