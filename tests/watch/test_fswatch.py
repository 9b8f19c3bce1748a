"""Change detection: inotify on local disk, polling on shared filesystems or when forced."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest

from supervisor.watch.fswatch import (
    SHARED_FS_MAGIC,
    ChangeSource,
    FsInfo,
    _mount_fstype,
    detect_fs,
    existing_ancestor,
)

GUARD_S = 10  # a hang guard, not a latency assertion


def nfs(_path: str | Path) -> FsInfo:
    return FsInfo(0x6969, "nfs", True)


def append(path: Path, data: bytes) -> None:
    with open(path, "ab") as fh:
        fh.write(data)


async def next_containing(src: ChangeSource, wanted: str) -> set[str]:
    """Change sets until one names `wanted` (others may report siblings or earlier writes)."""
    with anyio.fail_after(GUARD_S):
        async for changed in src:
            if wanted in changed:
                return changed
    raise AssertionError("unreachable")


def test_the_shared_filesystem_table_has_the_usual_suspects() -> None:
    names = set(SHARED_FS_MAGIC.values())
    assert {"nfs", "lustre", "gpfs", "cifs", "smb2", "beegfs", "ceph", "fuse", "9p"} <= names
    assert SHARED_FS_MAGIC[0x0BD00BD0] == "lustre" and SHARED_FS_MAGIC[0x47504653] == "gpfs"


def test_local_tmp_is_not_shared_and_missing_paths_use_their_ancestor(tmp_path: Path) -> None:
    info = detect_fs(tmp_path / "not" / "yet" / "there.log")
    assert info.shared is False
    assert existing_ancestor(tmp_path / "not" / "yet") == tmp_path


def test_mountinfo_lookup_picks_the_longest_mount_point(tmp_path: Path) -> None:
    mi = tmp_path / "mountinfo"
    mi.write_text(
        "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
        "40 22 0:50 / /lustre rw shared:2 - lustre 10.0.0.1@o2ib:/fs rw\n"
        "41 40 0:51 / /lustre/scratch\\040space rw - fuse.sshfs host:/x rw\n"
    )
    assert _mount_fstype("/lustre/proj/a.log", str(mi)) == "lustre"
    assert _mount_fstype("/lustre/scratch space/a.log", str(mi)) == "fuse.sshfs"
    assert _mount_fstype("/lustreX/a", str(mi)) == "ext4"


def test_paths_on_shared_filesystems_are_polled_and_forcing_polls_everything(tmp_path: Path) -> None:
    assert ChangeSource(detect=nfs).add(tmp_path / "a.log") == "poll"
    assert ChangeSource().add(tmp_path / "a.log") == "inotify"
    assert ChangeSource(force_polling=True).add(tmp_path / "a.log") == "poll"


@pytest.mark.anyio
async def test_inotify_reports_an_appended_line(tmp_path: Path) -> None:
    log = tmp_path / "ray-driver.log"
    log.write_bytes(b"")
    other = tmp_path / "unwatched.log"
    async with ChangeSource(poll_interval_s=60) as src:
        assert src.add(log) == "inotify"
        await anyio.sleep(0.2)  # let the watch start; a sweep would catch an earlier write anyway
        append(other, b"noise\n")
        append(log, b"hello\n")
        changed = await next_containing(src, str(log))
        assert str(other) not in changed


@pytest.mark.anyio
async def test_inotify_sees_a_log_dir_created_later_by_the_job(tmp_path: Path) -> None:
    log = tmp_path / "123-logs" / "ray-head.log"
    async with ChangeSource(poll_interval_s=60) as src:
        src.add(log)
        await anyio.sleep(0.1)
        log.parent.mkdir()
        log.write_bytes(b"started\n")
        await next_containing(src, str(log))
        append(log, b"more\n")  # and the watch moved to the new folder
        await next_containing(src, str(log))


@pytest.mark.anyio
async def test_inotify_reports_deletion_of_a_watched_file(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    log.write_bytes(b"x\n")
    async with ChangeSource(poll_interval_s=60) as src:
        src.add(log)
        await anyio.sleep(0.1)
        log.unlink()
        await next_containing(src, str(log))


@pytest.mark.anyio
async def test_forced_polling_reports_appends_creation_and_stops_after_remove(tmp_path: Path) -> None:
    log = tmp_path / "slurm-9.out"
    later = tmp_path / "9-logs" / "ray-driver.log"
    async with ChangeSource(poll_interval_s=0.05, force_polling=True) as src:
        src.add(log)
        src.add(later)
        log.write_bytes(b"a\n")
        await next_containing(src, str(log))
        later.parent.mkdir()
        later.write_bytes(b"b\n")
        await next_containing(src, str(later))
        src.remove(log)
        append(log, b"ignored\n")
        append(later, b"c\n")
        changed = await next_containing(src, str(later))
        assert str(log) not in changed
        assert src.paths == frozenset({str(later)})


@pytest.mark.anyio
async def test_polling_sees_a_size_change_even_with_the_same_mtime(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    log.write_bytes(b"a\n")
    st = log.stat()
    async with ChangeSource(poll_interval_s=0.05, detect=nfs) as src:
        src.add(log)
        append(log, b"b\n")
        os.utime(log, ns=(st.st_atime_ns, st.st_mtime_ns))
        await next_containing(src, str(log))


@pytest.mark.parametrize("force_polling", [False, True])
@pytest.mark.anyio
async def test_a_watched_folder_reports_its_new_entries(tmp_path: Path, force_polling: bool) -> None:
    tb = tmp_path / "exp_001" / "tensorboard"
    tb.mkdir(parents=True)
    async with ChangeSource(poll_interval_s=0.05, force_polling=force_polling) as src:
        src.add(tb, is_dir=True)
        await anyio.sleep(0.1)
        event_file = tb / "events.out.tfevents.1.host"
        event_file.write_bytes(b"x")
        await next_containing(src, str(event_file))
