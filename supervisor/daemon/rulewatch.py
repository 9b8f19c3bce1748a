"""A rules file that changes reloads the rules: the shipped and configured folders, and each run's own
`rules.files` wherever they live (a run's file is what its author edits while it runs)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path

import anyio
import structlog
import watchfiles

log = structlog.get_logger(__name__)

RECHECK_S = 5.0  # how often the set of runs' rules files is looked at again (runs come and go)


def watched(dirs: Iterable[Path], files: Iterable[Path]) -> tuple[set[Path], set[Path], set[Path]]:
    """(folders to watch, the folders whose every file is a rules file, the runs' own files): a run's file
    is watched through its folder, which may hold anything else, so only that file's changes count."""
    whole = {d for d in dirs if d.is_dir()}
    own = {f for f in files if f.parent.is_dir()}
    return whole | {f.parent for f in own}, whole, own


async def watch_rules_files(
    dirs: Callable[[], Iterable[Path]],
    run_files: Callable[[], Iterable[Path]],
    reload: Callable[[str], Awaitable[object]],
    *,
    force_polling: bool | None = None,
    debounce_ms: int = 300,
    recheck_s: float = RECHECK_S,
) -> None:
    """Call `reload` when a rules file changes; the folders watched follow the runs' `rules.files`."""
    while True:
        now = watched(dirs(), run_files())
        if not now[0]:
            await anyio.sleep(recheck_s)
            continue
        stop = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(_until_changed, now, dirs, run_files, stop, recheck_s)
            await _watch(now, reload, stop, force_polling=force_polling, debounce_ms=debounce_ms)
            tg.cancel_scope.cancel()


async def _until_changed(
    now: tuple[set[Path], set[Path], set[Path]],
    dirs: Callable[[], Iterable[Path]],
    run_files: Callable[[], Iterable[Path]],
    stop: anyio.Event,
    recheck_s: float,
) -> None:
    """Set `stop` once the rules files to watch are others than `now` (a run came or its spec changed)."""
    while True:
        await anyio.sleep(recheck_s)
        if watched(dirs(), run_files()) != now:
            stop.set()
            return


async def _watch(
    now: tuple[set[Path], set[Path], set[Path]],
    reload: Callable[[str], Awaitable[object]],
    stop: anyio.Event,
    *,
    force_polling: bool | None,
    debounce_ms: int,
) -> None:
    folders, whole, own = now
    mine = {str(f) for f in own}

    def relevant(_change: watchfiles.Change, path: str) -> bool:
        return Path(path).parent in whole or path in mine

    async for changes in watchfiles.awatch(
        *folders,
        watch_filter=relevant,
        debounce=debounce_ms,
        recursive=False,
        stop_event=stop,
        force_polling=force_polling,
    ):
        names = sorted({Path(p).name for _, p in changes})
        log.info("rules file changed", files=names)
        await reload("rules file changed: " + ", ".join(names))
