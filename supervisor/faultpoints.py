"""Named crash points for crash-safety tests.

`SHEPHERD_CRASH_AT=<name>` makes the daemon SIGKILL itself when it reaches that
point, so a test can prove e.g. that a crash between `sbatch` and the commit
neither loses the job nor submits it twice. Unset (always, in production), a
crash point costs one dict lookup.

The points (each is where a SIGKILL is most awkward; tests/integration/test_chaos.py kills at each):
- after-intent: the attempt's intent is committed, sbatch has not run (restart: NEVER_SUBMITTED, resubmit)
- after-sbatch: sbatch returned a job id, not yet committed (restart: the job is found by its tag)
- after-ended: the attempt's end is committed, the rules have not seen it (restart: the end is handled)
- after-decision: a decision is recorded, not carried out (restart: it is carried out)
- before-outcome: its state changes are done, its messages and outcome not committed (restart: redone once)
"""

from __future__ import annotations

import os
import signal

POINTS = ("after-intent", "after-sbatch", "after-ended", "after-decision", "before-outcome")


def crash_point(name: str) -> None:
    wanted = os.environ.get("SHEPHERD_CRASH_AT")
    if wanted and wanted == name:
        os.kill(os.getpid(), signal.SIGKILL)
