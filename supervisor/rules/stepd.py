"""What slurmstepd writes into a job's output file (cancellations with their reason, oom-kills), read as if
Slurm had reported the state: so replaying a log shows time limits, preemptions and OOM kills too."""

from __future__ import annotations

from supervisor.domain.jobstate import JobState
from supervisor.rules.regex import compile_regex

# Slurm >= 17.11 names the node before the time (`*** JOB 1 ON n1 CANCELLED AT t DUE TO TIME LIMIT ***`);
# older releases after it (`*** JOB 1 CANCELLED AT t DUE TO TIME LIMIT on n1 ***`, `... AT t *** on n1`).
# A node failure adds advice after the reason: `DUE TO NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS ***`.
# In RE2 like the rules: under Python's re the lazy reason followed by `\s*$` was quadratic in a line of
# spaces after `DUE TO`.
STEPD_CANCEL_RE = compile_regex(
    r"\*\*\* (?:JOB|STEP) (\S+) (?:ON (\S+) )?CANCELLED AT (\S+)(?: DUE TO ([A-Z][A-Z ]*?)(?:,[^*]*?)?)?"
    r"(?: on (\S+))?(?: \*\*\*|\s*$)"
)
STEPD_OOM_RE = compile_regex(
    r"oom_kill event in StepId=|oom-kill event\(s\) in step|Detected \d+ oom[-_]kill event"
)
STEPD_LITERALS = ("CANCELLED AT", "oom_kill event", "oom-kill event")
DUE_TO_STATE = {
    "TIME LIMIT": JobState.TIMEOUT,
    "PREEMPTION": JobState.PREEMPTED,
    "NODE FAILURE": JobState.NODE_FAIL,
}


def stepd_state(line: str) -> tuple[JobState, str] | None:
    """The job state slurmstepd announced in an output-file line, with the line's node if any."""
    if "CANCELLED AT" in line:
        m = STEPD_CANCEL_RE.search(line)
        if m:
            due = (m.group(4) or "").strip()
            return DUE_TO_STATE.get(due, JobState.CANCELLED), m.group(2) or m.group(5) or ""
    if "oom" in line and STEPD_OOM_RE.search(line):
        return JobState.OUT_OF_MEMORY, ""
    return None
