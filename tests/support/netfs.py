"""A small FUSE filesystem that stands in for an NFS mount, because this kernel has no NFS client or server.

It passes every call through to a backing folder (the "server"); mounting one backing folder twice gives two
"clients" (two login nodes) whose kernels each cache on their own. What it imitates of NFS:

- **attribute and name caching**: mounted with `--cache S`, the kernel keeps attributes, names and
  *negative* lookups for S seconds (NFS's acregmin/acdirmin, lookupcache=all), so a file another mount just
  created can stay invisible to this one for a while, like a renewal written on another login node; an open
  file's pages are not revalidated when another mount changes it (a stale page cache);
- **lost/refused locks**: it implements no `lock`/`flock`, so each mount's kernel grants byte-range locks on
  its own and two mounts never see each other's locks (NFS mounted `nolock`, or a broken lock manager):
  exactly the case where SQLite with two writers corrupts its file;
- **ESTALE**: paths containing a string listed in the backing folder's `.netfs-estale` file fail with ESTALE
  (a file handle the server no longer knows, after a failover of the NFS server or a remount);
- statfs says FUSE (0x65735546), which `watch/fswatch.detect_fs` reports as a shared filesystem.

Run: `python tests/support/netfs.py BACKING MOUNTPOINT [--cache SECONDS]` (foreground); `fusermount3 -u`
ends it.
"""

from __future__ import annotations

import argparse
import errno
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ESTALE_FILE = ".netfs-estale"


def fuse_available() -> str | None:
    """Why FUSE mounts cannot be made here, or None."""
    if not Path("/dev/fuse").exists():
        return "no /dev/fuse"
    if shutil.which("fusermount3") is None and shutil.which("fusermount") is None:
        return "fusermount3 is not installed (Debian package fuse3)"
    try:
        import mfusepy  # noqa: F401  (optional test dependency)
    except (ImportError, OSError) as exc:
        return f"mfusepy or libfuse is missing: {exc}"
    return None


@contextmanager
def mounted(backing: Path, mountpoint: Path, *, cache_s: float = 0.0) -> Iterator[Path]:
    """Mount `backing` at `mountpoint` for the duration of the block."""
    backing.mkdir(parents=True, exist_ok=True)
    mountpoint.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(
        [sys.executable, __file__, str(backing), str(mountpoint), "--cache", str(cache_s)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 20
    while not os.path.ismount(mountpoint):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
            raise RuntimeError(f"netfs did not mount {mountpoint}: {err[-2000:]}")
        time.sleep(0.05)
    try:
        yield mountpoint
    finally:
        tool = shutil.which("fusermount3") or "fusermount"
        subprocess.run([tool, "-u", "-z", str(mountpoint)], capture_output=True)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _operations(root: str) -> Any:
    import mfusepy

    class NetFs(mfusepy.Operations):  # type: ignore[misc]
        use_ns = True

        def __init__(self) -> None:
            self.root = root
            self._estale: tuple[float, list[str]] = (-1.0, [])

        def _p(self, path: str) -> str:
            self._maybe_estale(path)
            return os.path.join(self.root, path.lstrip("/"))

        def _maybe_estale(self, path: str) -> None:
            f = os.path.join(self.root, ESTALE_FILE)
            try:
                mtime = os.stat(f).st_mtime
            except FileNotFoundError:
                return
            if mtime != self._estale[0]:
                with open(f) as fh:
                    self._estale = (mtime, [w for w in fh.read().split() if w])
            if any(w in path for w in self._estale[1]):
                raise mfusepy.FuseOSError(errno.ESTALE)

        def access(self, path: str, amode: int) -> int:
            if not os.access(self._p(path), amode):
                raise mfusepy.FuseOSError(errno.EACCES)
            return 0

        def chmod(self, path: str, mode: int) -> int:
            os.chmod(self._p(path), mode)
            return 0

        def chown(self, path: str, uid: int, gid: int) -> int:
            os.chown(self._p(path), uid, gid)
            return 0

        def create(self, path: str, mode: int, fi: Any = None) -> int:
            # The open flags are not passed here; the lease never relies on O_EXCL across hosts (link).
            return os.open(self._p(path), os.O_RDWR | os.O_CREAT, mode)

        def open(self, path: str, flags: int) -> int:
            return os.open(self._p(path), flags)

        def flush(self, path: str, fh: int) -> int:
            return 0

        def fsync(self, path: str, datasync: int, fh: int) -> int:
            if datasync:
                os.fdatasync(fh)
            else:
                os.fsync(fh)
            return 0

        def getattr(self, path: str, fh: int | None = None) -> dict[str, Any]:
            st = os.lstat(self._p(path))
            keys = ("st_atime_ns", "st_ctime_ns", "st_mtime_ns", "st_gid", "st_mode", "st_nlink", "st_size")
            out: dict[str, Any] = {k.replace("_ns", ""): getattr(st, k) for k in keys}
            out["st_uid"] = st.st_uid
            out["st_ino"] = st.st_ino
            return out

        def link(self, target: str, source: str) -> int:
            os.link(self._p(source), self._p(target))
            return 0

        def mkdir(self, path: str, mode: int) -> int:
            os.mkdir(self._p(path), mode)
            return 0

        def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
            return os.pread(fh, size, offset)

        def readdir(self, path: str, fh: int) -> list[str]:
            return [".", "..", *os.listdir(self._p(path))]

        def readlink(self, path: str) -> str:
            return os.readlink(self._p(path))

        def release(self, path: str, fh: int) -> int:
            os.close(fh)
            return 0

        def rename(self, old: str, new: str) -> int:
            os.rename(self._p(old), self._p(new))
            return 0

        def rmdir(self, path: str) -> int:
            os.rmdir(self._p(path))
            return 0

        def statfs(self, path: str) -> dict[str, int]:
            sv = os.statvfs(self._p(path))
            keys = (
                "f_bavail",
                "f_bfree",
                "f_blocks",
                "f_bsize",
                "f_favail",
                "f_ffree",
                "f_files",
                "f_frsize",
            )
            return {k: getattr(sv, k) for k in keys} | {"f_namemax": sv.f_namemax}

        def symlink(self, target: str, source: str) -> int:
            os.symlink(source, self._p(target))
            return 0

        def truncate(self, path: str, length: int, fh: int | None = None) -> int:
            if fh is not None:
                os.ftruncate(fh, length)
            else:
                os.truncate(self._p(path), length)
            return 0

        def unlink(self, path: str) -> int:
            os.unlink(self._p(path))
            return 0

        def utimens(self, path: str, times: tuple[int, int] | None = None) -> int:
            os.utime(self._p(path), ns=times)
            return 0

        def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
            return os.pwrite(fh, data, offset)

    return NetFs()


def main() -> None:
    import mfusepy

    ap = argparse.ArgumentParser()
    ap.add_argument("backing")
    ap.add_argument("mountpoint")
    ap.add_argument("--cache", type=float, default=0.0, help="attribute, name and negative-lookup cache (s)")
    a = ap.parse_args()
    mfusepy.FUSE(
        _operations(os.path.abspath(a.backing)),
        a.mountpoint,
        foreground=True,
        nothreads=False,
        attr_timeout=a.cache,
        entry_timeout=a.cache,
        negative_timeout=a.cache,
    )


if __name__ == "__main__":
    main()
