"""Named crash points for crash-safety tests.

`SHEPHERD_CRASH_AT=<name>` makes the daemon SIGKILL itself when it reaches that
point, so a test can prove e.g. that a crash between `sbatch` and the commit
neither loses the job nor submits it twice. Unset (always, in production), a
crash point costs one dict lookup.
"""

from __future__ import annotations

import os
import signal


def crash_point(name: str) -> None:
    wanted = os.environ.get("SHEPHERD_CRASH_AT")
    if wanted and wanted == name:
        os.kill(os.getpid(), signal.SIGKILL)
