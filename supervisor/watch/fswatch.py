"""Which watched files changed: inotify where it works, polling where it cannot.

inotify only reports changes made through the local kernel, so writes by
compute nodes to NFS/Lustre/GPFS/... never show up on the login node running
the daemon. Paths on such filesystems (detected with statfs, falling back to
/proc/self/mountinfo for FUSE subtypes) are polled instead: open + fstat per
file, because a plain stat on NFS may return attributes cached for up to a
minute while an open revalidates them (close-to-open consistency).

Only the files and folders of active runs are watched (each poll is metadata
load on a parallel filesystem); `add`/`remove` change the set at runtime. A
watched path that does not exist yet is fine: inotify watches its nearest
existing ancestor until it appears, polling just sees it appear.

Latency: watchfiles' default 1.6 s debounce would eat the whole latency
budget, so it runs with a 50 ms debounce and a 10 ms step; the poller keeps a
fixed cadence (the sleep is shortened by the time the sweep took).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import math
import os
import struct
from collections.abc import Callable
from contextlib import aclosing
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Literal

import anyio
import anyio.lowlevel
import structlog
import watchfiles
from anyio.abc import TaskGroup, TaskStatus

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


@dataclass(slots=True)
class _Watched:
    path: str
    mode: Mode
    is_dir: bool
    sig: FileSig = None
    dsig: DirSig | None = None


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
    ) -> None:
        self.poll_interval_s = poll_interval_s
        self.force_polling = force_polling
        self.debounce_ms = debounce_ms
        self.step_ms = step_ms
        self.detect = detect
        self._watched: dict[str, _Watched] = {}
        self._send, self._recv = anyio.create_memory_object_stream[set[str]](max_buffer_size=math.inf)
        self._wake_inotify = anyio.Event()
        self._stop_current: anyio.Event | None = None
        self._tg: TaskGroup | None = None
        self._current_roots: frozenset[str] = frozenset()

    # ---- the watched set ------------------------------------------------------------------------------
    def add(self, path: str | Path, *, is_dir: bool = False) -> Mode:
        """Watch a file (or, with is_dir, a folder's entries); it need not exist yet."""
        key = os.path.abspath(path)
        if key in self._watched:
            return self._watched[key].mode
        mode: Mode = "poll" if self.force_polling or self.detect(key).shared else "inotify"
        w = _Watched(key, mode, is_dir)
        if is_dir:
            w.dsig = dir_signature(key)
        else:
            w.sig = file_signature(key)
        self._watched[key] = w
        log.debug("watching", path=key, mode=mode)
        if mode == "inotify":
            self._reroot()
        return mode

    def remove(self, path: str | Path) -> None:
        w = self._watched.pop(os.path.abspath(path), None)
        if w is not None and w.mode == "inotify":
            self._reroot()

    def mode(self, path: str | Path) -> Mode | None:
        w = self._watched.get(os.path.abspath(path))
        return w.mode if w else None

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
        """Compare every watched path (of one mode) with its last signature; update and return the changed."""
        changed: set[str] = set()
        for w in list(self._watched.values()):
            if mode is not None and w.mode != mode:
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

    async def _poll_loop(self) -> None:
        while True:
            started = anyio.current_time()
            if any(w.mode == "poll" for w in self._watched.values()):
                try:
                    changed = await anyio.to_thread.run_sync(self.sweep, "poll")
                except Exception as exc:  # never let one bad sweep stop the poller
                    log.warning("polling sweep failed", error=str(exc))
                    changed = set()
                self._emit(changed)
            elapsed = anyio.current_time() - started
            await anyio.sleep(max(0.0, self.poll_interval_s - elapsed))

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
