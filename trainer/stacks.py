"""Every process of the trainer dumps all its threads' Python stacks on SIGUSR2, so Shepherd can see where a
hung run is stuck even where ptrace (py-spy) is not allowed (Yama ptrace_scope >= 1, containers).

`faulthandler` writes from its C signal handler, so it answers even when the interpreter is wedged (a thread
holding the GIL in a C call excepted). The dump goes to `$SHEPHERD_STACKS_DIR/<pid>.txt` (default
/tmp/shepherd-stacks, node-local), where Shepherd's probe (supervisor/act/forensics_probe.py) reads it; the
probe signals only processes that catch SIGUSR2. SIGUSR1 stays the graceful stop (driver.StopFlag).

NeMo RL users get the same with two lines in their entry script and in each Ray actor's __init__:
    import faulthandler, os, signal; os.makedirs("/tmp/shepherd-stacks", exist_ok=True)
    faulthandler.register(signal.SIGUSR2, open(f"/tmp/shepherd-stacks/{os.getpid()}.txt", "a"), True)
(keep the file object alive); see docs/watching.md.
"""

from __future__ import annotations

import faulthandler
import os
import signal
from pathlib import Path
from typing import IO

DEFAULT_DIR = "/tmp/shepherd-stacks"
_open: list[IO[str]] = []  # faulthandler keeps the file's descriptor: the file object must stay alive


def enable_stack_dump() -> Path | None:
    """Register the dump for this process (idempotent); where it will be written, None if it cannot be."""
    path = Path(os.environ.get("SHEPHERD_STACKS_DIR") or DEFAULT_DIR) / f"{os.getpid()}.txt"
    if _open and _open[0].name == str(path):
        return path
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        os.chmod(path.parent, 0o1777)  # several users' jobs share a node: sticky, like /tmp
    except OSError:
        pass
    try:
        f = path.open("a")
    except OSError:
        return None
    faulthandler.register(signal.SIGUSR2, file=f, all_threads=True, chain=False)
    _open[:] = [f]
    return path
