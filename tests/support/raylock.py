"""A host-wide readers-writer lock between tests that run Ray: NeMo RL's ray.sub runs `ray stop` (every Ray of
the user on the host) and removes /tmp/ray/session_* before it starts, so a test that runs it must run alone
among Ray users, in this pytest session, its xdist workers and any other checkout's suite on the host.

Tests marked `ray` take the lock shared; tests marked `ray_stop` (they run NeMo RL's ray.sub) take it
exclusive. fcntl.flock has no writer priority, so a turnstile file keeps a waiting writer from starving behind
readers that take turns: a writer holds it while it waits, and each reader passes through it first.
The kernel releases a flock when a worker dies, so a crashed test never wedges the others. Within a process
the lock is reentrant (a module of ray.sub tests holds it while its daemon lives, each of its tests takes it
again): two flocks of one process on two descriptors would wait on each other.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

# Host-wide: every checkout's suite meets here.
LOCK_DIR = Path(os.environ.get("SHEPHERD_TEST_LOCK_DIR", "/tmp"))


class _Held:
    """What this process holds: the mode, how many nested holders, and the open lock files."""

    exclusive = False
    depth = 0
    files: ExitStack | None = None


_held = _Held()


def _acquire(exclusive: bool) -> ExitStack:
    LOCK_DIR.mkdir(parents=True, exist_ok=True)
    stack = ExitStack()
    turnstile = stack.enter_context(open(LOCK_DIR / "shepherd-tests-ray.turnstile", "a"))
    lock = stack.enter_context(open(LOCK_DIR / "shepherd-tests-ray.lock", "a"))
    fcntl.flock(turnstile, fcntl.LOCK_EX)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
    finally:
        if not exclusive:  # a writer keeps the turnstile until it is done: readers queue behind it
            fcntl.flock(turnstile, fcntl.LOCK_UN)
    return stack  # closing the files releases both


def waits_file(session_pid: int) -> Path:
    """Where a session's workers note how long each test waited for the lock (the controller's pid: an
    xdist worker's parent), so scripts/test can say what the lock cost."""
    return LOCK_DIR / f"shepherd-tests-ray.waits.{session_pid}"


def _note_wait(who: str, exclusive: bool, seconds: float) -> None:
    """A note, never a failure: a lock folder that cannot be written must not fail (or wedge) the test."""
    if seconds < 1.0:
        return
    pid = os.getppid() if os.environ.get("PYTEST_XDIST_WORKER") else os.getpid()
    try:
        with open(waits_file(pid), "a", encoding="utf-8") as f:
            f.write(f"{seconds:.1f}\t{'exclusive' if exclusive else 'shared'}\t{who}\n")
    except OSError:
        pass


def holds_exclusive() -> bool:
    """Whether this process holds the lock exclusively now."""
    return _held.depth > 0 and _held.exclusive


@contextmanager
def ray_users(*, exclusive: bool, who: str = "") -> Iterator[None]:
    if not _held.depth:
        began = time.monotonic()
        _held.files, _held.exclusive = _acquire(exclusive), exclusive
        _note_wait(who, exclusive, time.monotonic() - began)
    elif exclusive and not _held.exclusive:
        raise RuntimeError("a Ray test holding the lock shared cannot upgrade it to exclusive")
    _held.depth += 1
    try:
        yield
    finally:
        _held.depth -= 1
        if _held.depth == 0 and _held.files is not None:
            _held.files.close()
            _held.files = None
