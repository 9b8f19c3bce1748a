"""Pure parsers for Slurm's text output (tested on recorded output of Slurm 22.05).

We parse `-o`/`-P` text rather than `--json`: in 22.05 `squeue --json`
ignores `-j`/`-t` and `sacct --json` reports failed exit codes as success.
A line we can't read is reported, never guessed at.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

from supervisor.domain.jobstate import JobState, slurm_word

# One squeue call for every job of the user; the fields are joined with '|' and our own
# job names and comments never contain one.
SQUEUE_FIELDS = ("%i", "%j", "%T", "%r", "%k", "%N", "%S", "%M", "%l")
SQUEUE_FORMAT = "|".join(SQUEUE_FIELDS)
SACCT_FIELDS = (
    "JobID",
    "JobName",
    "State",
    "ExitCode",
    "Comment",
    "NodeList",
    "Start",
    "End",
    "Elapsed",
    "Reason",
)

# A job's name, comment and reason are short; a longer line is not one we wrote or can trust to split.
MAX_LINE_CHARS = 16 * 1024

_TAG_RE = re.compile(r"shepherd:run=(?P<run>[A-Za-z0-9._-]+):attempt=(?P<attempt>\d+)(?::gen=(?P<gen>\d+))?")
_NAME_RE = re.compile(r"shep-(?P<run>[A-Za-z0-9._-]+)-a(?P<attempt>\d+)")


@dataclass(frozen=True, slots=True)
class JobObservation:
    """What Slurm said about one job, at one moment."""

    job_id: str
    name: str
    state: JobState
    reason: str = ""
    comment: str = ""
    nodes: str = ""
    # Slurm's own words (`2026-11-23T22:26:51`, local time); squeue's is a forecast while PENDING.
    start_time: str = ""
    exit_code: int | None = None
    signal: int | None = None
    source: str = "squeue"
    end_time: str = ""  # sacct's End (squeue's output has none)

    @property
    def tag(self) -> tuple[str, int] | None:
        """(run id, attempt) from our `--comment`, else from our job name (sacct -c has no comment)."""
        m = _TAG_RE.search(self.comment) or _NAME_RE.fullmatch(self.name)
        return (m["run"], int(m["attempt"])) if m else None

    @property
    def generation(self) -> int | None:
        """The lease generation of the daemon that submitted the job (`:gen=` in the comment), if known."""
        m = _TAG_RE.search(self.comment)
        return int(m["gen"]) if m and m["gen"] else None


@dataclass(frozen=True, slots=True)
class ParseProblem:
    line_no: int
    line: str
    reason: str
    state_word: str = ""  # set for a line whose only fault is a state word we do not know (read as UNKNOWN)


def parse_state(text: str) -> JobState:
    """`RUNNING`, `R`, `CANCELLED by 0`, `FAILED+` ... -> JobState (the words: domain/jobstate.py)."""
    return JobState.from_slurm(text)


def parse_exit_code(text: str) -> tuple[int | None, int | None]:
    """sacct's `3:0` is (exit status, signal)."""
    m = re.fullmatch(r"\s*(\d+):(\d+)\s*", text)
    if not m:
        return None, None
    return int(m[1]), int(m[2])


def _blank(value: str) -> str:
    value = value.strip()
    return "" if value in {"(null)", "None", "N/A", "Unknown", "None assigned"} else value


def parse_squeue(output: str) -> tuple[list[JobObservation], list[ParseProblem]]:
    """Parse `squeue -h -o SQUEUE_FORMAT` output."""
    jobs: list[JobObservation] = []
    problems: list[ParseProblem] = []
    for i, line in enumerate(output.splitlines(), start=1):
        if not line.strip():
            continue
        if len(line) > MAX_LINE_CHARS:
            problems.append(
                ParseProblem(i, line[:200], f"line of {len(line)} characters (limit {MAX_LINE_CHARS})")
            )
            continue
        parts = line.split("|")
        if len(parts) != len(SQUEUE_FIELDS):
            problems.append(ParseProblem(i, line, f"expected {len(SQUEUE_FIELDS)} fields, got {len(parts)}"))
            continue
        job_id, name, state, reason, comment, nodes, start, _elapsed, _limit = parts
        if not re.fullmatch(r"\d+(_\d+|_\[[^\]]*\])?(\+\d+)?", job_id.strip()):
            problems.append(ParseProblem(i, line, f"not a job id: {job_id!r}"))
            continue
        parsed = parse_state(state)
        if parsed is JobState.UNKNOWN:
            problems.append(ParseProblem(i, line, f"unknown state {state!r}", state_word=slurm_word(state)))
        jobs.append(
            JobObservation(
                job_id=job_id.strip(),
                name=name.strip(),
                state=parsed,
                reason=_blank(reason),
                comment=_blank(comment),
                nodes=_blank(nodes),
                start_time=_blank(start),
            )
        )
    return jobs, problems


def parse_sacct(output: str) -> tuple[list[JobObservation], list[ParseProblem]]:
    """Parse `sacct -P -n -X -o <SACCT_FIELDS>` output (also `sacct -c`, whose fields may be blank)."""
    jobs: list[JobObservation] = []
    problems: list[ParseProblem] = []
    for i, line in enumerate(output.splitlines(), start=1):
        if not line.strip():
            continue
        if len(line) > MAX_LINE_CHARS:
            problems.append(
                ParseProblem(i, line[:200], f"line of {len(line)} characters (limit {MAX_LINE_CHARS})")
            )
            continue
        parts = line.split("|")
        if len(parts) < len(SACCT_FIELDS):
            problems.append(ParseProblem(i, line, f"expected {len(SACCT_FIELDS)} fields, got {len(parts)}"))
            continue
        # A comment may itself contain '|': the fields after it are fixed, so rejoin from both ends.
        extra = len(parts) - len(SACCT_FIELDS)
        job_id, name, state, exit_code = parts[0], parts[1], parts[2], parts[3]
        comment = "|".join(parts[4 : 5 + extra])
        nodes, start, end, _elapsed, reason = parts[5 + extra :]
        if "." in job_id:  # job steps: -X should drop them, but be safe
            continue
        code, sig = parse_exit_code(exit_code)
        parsed = parse_state(state)
        if parsed is JobState.UNKNOWN:
            problems.append(ParseProblem(i, line, f"unknown state {state!r}", state_word=slurm_word(state)))
        jobs.append(
            JobObservation(
                job_id=job_id.strip(),
                name=name.strip(),
                state=parsed,
                reason=_blank(reason),
                comment=_blank(comment),
                nodes=_blank(nodes),
                start_time=_blank(start),
                exit_code=code,
                signal=sig,
                source="sacct",
                end_time=_blank(end),
            )
        )
    return jobs, problems


def parse_slurm_time(text: str) -> float | None:
    """Slurm's `2026-11-23T22:26:51` (its default format, in the local time zone, which the commands share
    with this process: TZ passes through jobenv.py) as epoch seconds; None for `Unknown`, `None`, blank."""
    text = _blank(text)
    if not text:
        return None
    try:
        return time.mktime(time.strptime(text, "%Y-%m-%dT%H:%M:%S"))
    except (ValueError, OverflowError):
        return None


def parse_sbatch_parsable(output: str) -> str:
    """`sbatch --parsable` prints `<jobid>` or `<jobid>;<cluster>`; anything else is an error."""
    line = output.strip().splitlines()[-1] if output.strip() else ""
    job_id = line.split(";", 1)[0].strip()
    if not job_id.isdigit():
        raise ValueError(f"unexpected sbatch output: {output.strip()[:200]!r}")
    return job_id


def make_comment(run_id: str, attempt: int, generation: int | None = None) -> str:
    """The tag in `--comment`; `generation` is the submitting daemon's lease generation (whose job it is)."""
    gen = f":gen={generation}" if generation is not None else ""
    return f"shepherd:run={run_id}:attempt={attempt}{gen}"


def parse_sdiag_time(output: str) -> float:
    """The controller's time from sdiag's header, `sdiag output at Mon Nov 23 10:00:00 2026 (1795428000)`."""
    m = re.search(r"sdiag output at .*\((\d+)\)", output)
    if not m:
        raise ValueError(f"no time in sdiag's output: {output[:120]!r}")
    return float(m[1])


def make_job_name(run_id: str, attempt: int) -> str:
    return f"shep-{run_id}-a{attempt}"


# `Unexpected message received`: what `scontrol hold/release` print (rc 1, after ~9 s) when slurmctld is
# down, on 22.05 and 24.11 alike (tests/data/slurm/*/scontrol_*_ctld_down.stderr): never "Unable to contact".
# `Could not establish a configuration source`: no slurm.conf here and none from DNS (SLURM_CONF unset on a
# machine that is no cluster's login node): nobody was asked.
_UNREACHABLE = re.compile(
    r"Unable to contact slurm controller|Socket timed out|Connection refused|Zero Bytes were transmitted"
    r"|Transport endpoint|slurm_load_jobs error: Unable|Communication connection failure|Munge"
    r"|Unexpected message received|Could not establish a configuration source",
    re.IGNORECASE,
)


def looks_unreachable(stderr: str) -> bool:
    """Errors that mean "could not ask", as opposed to "Slurm said no"."""
    return bool(_UNREACHABLE.search(stderr))


def parse_scontrol_config(text: str) -> dict[str, str]:
    """`scontrol show config` (`Key = Value` lines) as a dict; 24.11 says `(null)` where 22.05 names a
    plugin's `.../none`."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() and " " not in key.strip():
            out.setdefault(key.strip(), value.strip())
    return out


_SHOW_FIELD_RE = re.compile(r"(?:^|\s)([A-Za-z][A-Za-z0-9:_/]*)=")


def parse_scontrol_job(text: str) -> dict[str, str]:
    """`scontrol show job -o JOBID` as a dict (the first job); a value runs to the next ` Key=`."""
    return _show_fields(next((ln for ln in text.splitlines() if "JobId=" in ln), ""))


def _show_fields(line: str) -> dict[str, str]:
    """`Key=value Key=value ...` of `scontrol show`: a value runs to the next ` Key=` (an OS string has
    spaces)."""
    marks = list(_SHOW_FIELD_RE.finditer(line))
    out: dict[str, str] = {}
    for i, m in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(line)
        out[m.group(1)] = line[m.end() : end].strip()
    return out


@dataclass(frozen=True, slots=True)
class SlurmNode:
    """One node as `scontrol show node` describes it: how it is reached (NodeAddr), the machine its slurmd
    runs on (NodeHostName), the partitions it serves and its state (`IDLE`, `MIXED`, `DOWN+DRAIN`,
    `UNKNOWN` until its slurmd registers with a restarted controller...)."""

    name: str
    addr: str
    hostname: str
    partitions: tuple[str, ...]
    state: str = ""
    gres: str = ""  # `Gres=` as sinfo's %G prints it (`gpu:4`, `gpu:h100:8(S:0-1)`); "" for (null)


def parse_scontrol_nodes(text: str) -> list[SlurmNode]:
    """`scontrol -o show node`, one line per node; a node without NodeAddr or NodeHostName is reached by its
    name, as Slurm does."""
    out: list[SlurmNode] = []
    for line in text.splitlines():
        fields = _show_fields(line)
        name = fields.get("NodeName", "")
        if not name:
            continue
        parts = tuple(p for p in fields.get("Partitions", "").split(",") if p)
        addr, host = fields.get("NodeAddr") or name, fields.get("NodeHostName") or name
        gres = fields.get("Gres", "")
        out.append(
            SlurmNode(name, addr, host, parts, fields.get("State", ""), "" if gres == "(null)" else gres)
        )
    return out


# What Slurm says when a node's host is gone, not merely kept from new work (the DRAIN and FAIL flags an
# admin or a health check sets leave the host up, running its jobs: `IDLE+DRAIN`, `MIXED+FAIL`; so does a
# requested POWER_DOWN or REBOOT_REQUESTED, carried out once its jobs end): state words as `scontrol show
# node` prints them, `*` being NOT_RESPONDING in its short form (`DOWN*+DRAIN`).
_HOST_GONE_WORDS = frozenset(
    {"DOWN", "NOT_RESPONDING", "POWERED_DOWN", "POWERING_DOWN", "POWERING_UP", "REBOOT_ISSUED"}
)


def host_down(state: str) -> bool:
    """Whether a node's `State=` says its host is down or unreachable (a fault on it cannot be drained
    from a job's Ray cluster: the job must go elsewhere)."""
    words = {w.strip("*~#!%$@^-") for w in state.upper().split("+")}
    return "*" in state or "~" in state or bool(words & _HOST_GONE_WORDS)


def node_for_address(sinfo: str, address: str, hostname: str | None = None) -> str | None:
    """The node an address names, from `sinfo -h -N -o "%N %o %n"` (NodeName, NodeAddr, NodeHostName):
    the node whose NodeAddr is `address`, else whose name or hostname is `hostname` (the address's reverse
    DNS name, domain dropped); None when none does. Ray names a failing worker by its IP, but `--exclude`
    wants a node name and refuses the whole submission for anything else."""
    short = hostname.split(".", 1)[0] if hostname else None
    for line in sinfo.splitlines():
        fields = line.split()
        if len(fields) < 2:
            continue
        name, addr, host = fields[0], fields[1], fields[2] if len(fields) > 2 else fields[0]
        if addr == address or (short is not None and short in (name, host, addr.split(".", 1)[0])):
            return name
    return None


def first_node(nodelist: str | None) -> str | None:
    """The first host of a Slurm node list (`gpu[007-009,012],cpu1` -> `gpu007`): where ray.sub runs the head
    and the driver (`scontrol show hostnames` order)."""
    m = re.match(r"\s*([^\[,\s]+)(?:\[(\d+))?", nodelist or "")
    if m is None or m.group(1) in ("(null)", "None"):
        return None
    return m.group(1) + (m.group(2) or "")
