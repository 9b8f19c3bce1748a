"""The daemon's half of the job-side runner's protocol (runner.sh's header is the other half): where its
files live and what they say, as pure functions, so a restart in place is data the tests can read."""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Literal

RUNNER = "runner.sh"
# An attempt's overrides flag: its job's runner names its folders after the run too (`<run id>-a<origin>`), so
# two runs that share a log_dir never read each other's; a job submitted before has `a<origin>` folders.
BY_RUN = "runner_by_run"
END = "end"  # the last line of every complete file (a word, a report)
SCRIPT_END = "# end"  # the last line of a complete run-K.sh
DEFAULT_WAIT_S = 600  # the runner's bound on Shepherd's silence (SHEPHERD_RUNNER_WAIT_S)
ENV_DIR = "SHEPHERD_RUNNER_DIR"
ENV_WAIT = "SHEPHERD_RUNNER_WAIT_S"
ENV_POLL = "SHEPHERD_RUNNER_POLL_S"
# runner.sh's `say` line before each driver run, in the job's driver log: `shepherd-runner [<date>]: driver
# run K starting ...` (the boundary between two driver runs of one job in the one log file they share).
RUN_STARTING_RE = re.compile(rb"(?m)^shepherd-runner \[[^]]*\]: driver run (\d+) starting")
_RUN_STARTING = re.compile(RUN_STARTING_RE.pattern.decode())
_RUN_EXITED = re.compile(r"shepherd-runner \[[^]]*\]: driver run (\d+) exited with code")


def run_starting(line: str) -> int | None:
    """K when `line` is the runner's `driver run K starting` line, else None."""
    m = _RUN_STARTING.match(line) if line.startswith("shepherd-runner [") else None
    return int(m.group(1)) if m else None


def run_exited(line: str) -> int | None:
    """K when `line` is the runner's `driver run K exited with code C` line, else None."""
    m = _RUN_EXITED.match(line) if line.startswith("shepherd-runner [") else None
    return int(m.group(1)) if m else None


def own_lines(texts: Sequence[str], run: int) -> tuple[list[str], bool]:
    """The lines of a file the driver's output goes to that are driver run `run`'s or later: those after the
    runner's `driver run <run-1> exited` line, or from its `driver run <run> starting` line, whichever comes
    first (the earlier ones, the previous run's, blanked so line numbers stay true); and whether that line
    was there (if not, every line is the previous run's)."""
    for i, text in enumerate(texts):
        if run_starting(text) == run:
            return [""] * i + list(texts[i:]), True
        if run_exited(text) == run - 1:
            return [""] * (i + 1) + list(texts[i + 1 :]), True
    return [""] * len(texts), False


Word = Literal["run", "end"]


def script_text() -> str:
    """runner.sh as shipped in the package."""
    return (resources.files("supervisor.slurm.launchers") / RUNNER).read_text(encoding="utf-8")


def runner_key(origin: int, run_id: str | None = None) -> str:
    """What the runner's folder is named after: the Shepherd run and attempt that submitted the job
    (`<run id>-a<origin>`, as runner.sh names it from SHEPHERD_RUN_ID and SHEPHERD_ATTEMPT), or the attempt
    alone (`a<origin>`) for a job whose runner came before the run id was part of it."""
    return f"{run_id}-a{origin}" if run_id else f"a{origin}"


def attempt_key(run_id: str, n: int, overrides: Mapping[str, object]) -> str:
    """runner_key of attempt `n`'s job, from what its overrides recorded (`origin`, BY_RUN)."""
    origin = overrides.get("origin")
    return runner_key(int(str(origin)) if origin else n, run_id if overrides.get(BY_RUN) else None)


def script_path(base: Path, run_id: str) -> Path:
    """Where the daemon puts the run's copy of runner.sh: the job's log folder base (`$BASE_LOG_DIR`), which
    the job surely reaches (Slurm writes its output file there, the runner's folders live there, and a
    container gets it mounted), where Shepherd's root may be on the login node's own disk."""
    return base / f"{run_id}-{RUNNER}"


def runner_dir(base: Path, key: str, start: int = 0) -> Path:
    """`<base>/<key>-runner` for the job's first start, `<key>-<i>-runner` for the i-th one after it (a
    requeue), as runner.sh claims them; `key` is runner_key's, or the job id for a runner started by hand."""
    return base / (f"{key}-{start}-runner" if start > 0 else f"{key}-runner")


def wrap(argv: Sequence[str], runner: Path) -> list[str]:
    """The driver's argv run under the runner."""
    return ["sh", str(runner), *argv]


def wrap_shell(command: str, runner: Path) -> str:
    """A shell command string (NeMo RL's COMMAND) run under the runner."""
    return shlex.join(["sh", str(runner), "bash", "-c", command])


@dataclass(frozen=True, slots=True)
class DriverExit:
    """What the runner reported when driver run `run` of the job exited."""

    run: int
    code: int
    at: float


def complete_lines(text: str, mark: str = END) -> list[str] | None:
    """The lines of a file the runner or the daemon wrote, or None while it is not complete."""
    lines = text.splitlines()
    return lines if lines and lines[-1] == mark else None


def _fields(lines: Sequence[str]) -> dict[str, str]:
    return dict(line.split("=", 1) for line in lines if "=" in line)


def parse_exit(text: str) -> DriverExit | None:
    """An `exit-K` report, or None while it is incomplete or malformed."""
    lines = complete_lines(text)
    if lines is None:
        return None
    f = _fields(lines)
    try:
        return DriverExit(int(f["run"]), int(f["code"]), float(f["at"]))
    except (KeyError, ValueError):
        return None


ENDED_NAME = "ended"  # the runner writes it as it ends the job (no more driver runs, no more words read)


def exit_name(run: int) -> str:
    return f"exit-{run}"


def word_name(run: int) -> str:
    return f"word-{run}"


def script_name(run: int) -> str:
    return f"run-{run}.sh"


def pre_name(run: int) -> str:
    """The optional step the runner runs before driver run `run` (runner.sh's pre-K.sh)."""
    return f"pre-{run}.sh"


# The drain, run by the runner before the next driver run (pre-K.sh) where the driver runs, so Ray's GCS is
# reachable: the Ray node at the Slurm node's address is drained with Ray's DrainNode (`ray drain-node`, the
# reason a preemption's, which the GCS always accepts), never stopped: every other Ray process keeps running
# and the node takes no new work. It needs the driver's Python to have ray (it does: the driver uses it).
_DRAIN_PY = """\
import os, socket, subprocess, sys
import ray
node, addr, why = sys.argv[1], sys.argv[2] or sys.argv[1], sys.argv[3]
try:
    ip = socket.gethostbyname(addr)
except OSError:
    ip = addr
address = os.environ.get("RAY_ADDRESS") or "auto"
ray.init(address=address, logging_level="ERROR", log_to_driver=False)
ids = [n["NodeID"] for n in ray.nodes() if n.get("Alive") and n.get("NodeManagerAddress") == ip]
ray.shutdown()
if len(ids) != 1:
    sys.exit(f"shepherd drain: {len(ids)} live Ray nodes at {ip} ({node}): drained none")
cli = os.path.join(os.path.dirname(sys.executable), "ray")
cli = cli if os.access(cli, os.X_OK) else "ray"
argv = [cli, "drain-node", "--address", address, "--node-id", ids[0], "--reason",
        "DRAIN_NODE_REASON_PREEMPTION", "--reason-message", why]
print(f"shepherd drain: draining Ray node {ids[0]} at {ip} ({node})", flush=True)
sys.exit(subprocess.call(argv))
"""


def drain_script(node: str, why: str) -> str:
    """A pre-K.sh that drains Slurm node `node` out of the job's Ray cluster (its address from scontrol when
    the job can ask, else the name resolved); it fails, so the job ends, when no single live Ray node is
    there. `SHEPHERD_PYTHON` (the job's environment) names the Python to use, else `python3`."""
    lines = [
        "#!/bin/sh",
        f"node={shlex.quote(node)}",
        "addr=$(scontrol show node -o \"$node\" 2>/dev/null | grep -o 'NodeAddr=[^ ]*' | cut -d= -f2)",
        f'exec "${{SHEPHERD_PYTHON:-python3}}" -c {shlex.quote(_DRAIN_PY)} "$node" "$addr" '
        + shlex.quote(why),
        SCRIPT_END,
    ]
    return "\n".join(lines) + "\n"


def word_text(word: Word, *, attempt: int, delay_s: float = 0.0) -> str:
    """Shepherd's word after a driver run: `run` (again, as `attempt`) or `end` (the job)."""
    return f"word={word}\nattempt={attempt}\ndelay_s={max(0, round(delay_s))}\n{END}\n"


def parse_word(text: str) -> tuple[Word, int] | None:
    """A word file read back (the daemon's pickup after a restart), or None while incomplete."""
    lines = complete_lines(text)
    if lines is None:
        return None
    f = _fields(lines)
    word = f.get("word")
    if word not in ("run", "end"):
        return None
    try:
        return ("run" if word == "run" else "end"), int(f.get("attempt", "0"))
    except ValueError:
        return None


def run_script(argv: Sequence[str], env: Mapping[str, str]) -> str:
    """A driver run's command with its fix: the environment it adds, then the driver exec'ed (every word
    quoted for POSIX sh: nothing in it is interpreted)."""
    lines = ["#!/bin/sh"]
    lines += [f"export {k}={shlex.quote(v)}" for k, v in env.items() if k.isidentifier()]
    lines.append(f"exec {shlex.join(argv)}")
    lines.append(SCRIPT_END)
    return "\n".join(lines) + "\n"
