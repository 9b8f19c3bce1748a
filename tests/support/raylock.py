"""A host-wide readers-writer lock between tests that run Ray: NeMo RL's ray.sub runs `ray stop` (every Ray of
the user on the host) and removes /tmp/ray/session_* before it starts, so a test that runs it must run alone
among Ray users, in this pytest session, its xdist workers and any other checkout's suite on the host.

Tests marked `ray` take the lock shared; tests marked `ray_stop` (they run NeMo RL's ray.sub) take it
exclusive. fcntl.flock has no writer priority, so a turnstile file keeps a waiting writer from starving behind
readers that take turns: a writer holds it while it waits, and each reader passes through it first.
The kernel releases a flock when a worker dies, so a crashed test never wedges the others. A process that
already holds the lock exclusive (a module of ray.sub tests holds it while its daemon lives) takes it again
for free: two flocks of one process on two descriptors would wait on each other.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

LOCK_DIR = Path(
    os.environ.get("SHEPHERD_TEST_LOCK_DIR", "/tmp")
)  # host-wide: every checkout's suite meets here
_held_exclusive = 0  # how deep this process is inside ray_users(exclusive=True)


@contextmanager
def ray_users(*, exclusive: bool) -> Iterator[None]:
    global _held_exclusive
    if _held_exclusive:
        _held_exclusive += 1
        try:
            yield
        finally:
            _held_exclusive -= 1
        return
    LOCK_DIR.mkdir(parents=True, exist_ok=True)
    with (
        open(LOCK_DIR / "shepherd-tests-ray.turnstile", "a") as turnstile,
        open(LOCK_DIR / "shepherd-tests-ray.lock", "a") as lock,
    ):
        fcntl.flock(turnstile, fcntl.LOCK_EX)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        finally:
            if not exclusive:
                fcntl.flock(turnstile, fcntl.LOCK_UN)
        _held_exclusive = int(exclusive)
        try:
            yield
        finally:
            _held_exclusive = 0
            fcntl.flock(lock, fcntl.LOCK_UN)
            if exclusive:
                fcntl.flock(turnstile, fcntl.LOCK_UN)
