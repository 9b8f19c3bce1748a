"""A small async Slurm client: argv lists in, typed observations out.

Every call has a timeout. A command that fails or times out raises
`SlurmUnavailable` (we could not look) or `SlurmRejected` (Slurm said no);
callers must never read either as "the job finished".
"""

from __future__ import annotations

import getpass
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import anyio.to_thread
import structlog

from supervisor.redact import known_secrets
from supervisor.slurm.jobcomp import JobcompReader
from supervisor.slurm.jobenv import base_environment
from supervisor.slurm.parse import (
    SACCT_FIELDS,
    SQUEUE_FORMAT,
    JobObservation,
    ParseProblem,
    SlurmNode,
    looks_unreachable,
    node_for_address,
    parse_sacct,
    parse_sbatch_parsable,
    parse_scontrol_config,
    parse_scontrol_job,
    parse_scontrol_nodes,
    parse_sdiag_time,
    parse_squeue,
)

log = structlog.get_logger(__name__)


MAX_PROBLEMS_LOGGED = 5  # per call: thousands of garbage lines must not flood the log


def _log_problems(cmd: str, problems: list[ParseProblem], reported_words: set[str]) -> None:
    """Lines we could not read, a few per call; a state word we do not know (a newer Slurm's) once per word
    and process: it comes back on every poll for as long as the job is in it, and it is read as UNKNOWN
    (never finished), so repeating it would only drown the log."""
    unread = [p for p in problems if not p.state_word]
    for p in problems:
        if p.state_word and p.state_word not in reported_words:
            reported_words.add(p.state_word)
            log.warning(
                "slurm state word not known: the job is watched as UNKNOWN (never read as finished)",
                cmd=cmd,
                state=p.state_word[:100],
                line=p.line[:200],
            )
    for p in unread[:MAX_PROBLEMS_LOGGED]:
        log.warning(f"{cmd} line not understood", line_no=p.line_no, line=p.line[:200], reason=p.reason)
    if len(unread) > MAX_PROBLEMS_LOGGED:
        log.warning(f"{cmd}: more lines not understood", count=len(unread) - MAX_PROBLEMS_LOGGED)


class SlurmError(Exception):
    """Base class: a Slurm command did not give us an answer we can use."""


class SlurmUnavailable(SlurmError):
    """We could not ask (controller down, timeout, munge): says nothing about any job."""


class SlurmRejected(SlurmError):
    """Slurm answered and refused (invalid option, unknown account): retrying the same won't help."""


class Fenced(SlurmError):
    """This process may not change anything in Slurm now: it does not hold the root's lease (any more).

    Nothing was run, so it says nothing about any job; the daemon that holds the lease carries on.
    """


_KILLED_BY_TIMEOUT = 128 + 9  # coreutils timeout's status when it had to SIGKILL the command

# Raises when this process may not act for the next `need_s` seconds (supervisor/lease: Lease.fence).
Fence = Callable[[float], None]


@dataclass(frozen=True, slots=True)
class SubmitRequest:
    """Everything `sbatch` needs, as data: options, the batch script, the driver's argv, and the job's
    environment (over the client's base: jobenv.py; nothing else of this process's reaches the job)."""

    script: Path
    script_args: Sequence[str]
    options: Sequence[str]
    env: Mapping[str, str]
    workdir: Path | None = None


@dataclass
class SlurmCallStats:
    """Counts of Slurm RPC-making commands, for the scale benchmark and `status`."""

    calls: dict[str, int] = field(default_factory=dict)

    def count(self, cmd: str) -> None:
        self.calls[cmd] = self.calls.get(cmd, 0) + 1

    @property
    def total(self) -> int:
        return sum(self.calls.values())


class SlurmClient:
    def __init__(
        self,
        *,
        timeout_s: float = 30.0,
        bin_dir: Path | None = None,
        env: Mapping[str, str] | None = None,
        user: str | None = None,
        fence: Fence | None = None,
    ) -> None:
        """`fence` is checked before every sbatch, scancel, hold and release this client runs: the daemon's is
        its lease, so a daemon that lost it can never act, whichever of its parts asks."""
        self.timeout_s = timeout_s
        self.fence = fence
        self.bin_dir = bin_dir
        self.env = dict(env) if env is not None else None
        self.user = user or getpass.getuser()
        self.stats = SlurmCallStats()
        self.has_accounting: bool | None = None  # learnt on first sacct
        self.unknown_state_words: set[str] = set()  # already reported (once each)
        # Without slurmdbd: the jobcomp file, read incrementally for lost-intent lookups (None: not known yet;
        # False: not readable here, `sacct -c` it is).
        self.jobcomp: JobcompReader | bool | None = None
        # Told of every command: (name, seconds, outcome "ok" | "error" | "timeout"), for the metrics.
        self.on_call: Callable[[str, float, str], None] | None = None

    def _exe(self, name: str) -> str:
        return str(self.bin_dir / name) if self.bin_dir else name

    async def _run(
        self,
        argv: list[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        hard_limit: bool = False,
        timeout_s: float | None = None,
        what: str = "",
    ) -> subprocess.CompletedProcess[bytes]:
        """Run one Slurm command within `timeout_s` (the client's, unless given). With `hard_limit`
        (sbatch, scancel, hold) the command is also started under coreutils' `timeout -s KILL`, so it dies on
        time even if this process is stopped (SIGSTOP, a frozen VM) and cannot kill it: nothing it does lands
        after the lease it started under."""
        name = Path(argv[0]).name
        self.stats.count(name)
        # Built from scratch (jobenv.py): sbatch exports what it runs with into the job, srun --overlap
        # starts a process inside one, and a stray SBATCH_*/SQUEUE_* or SLURM_TIME_FORMAT would change
        # what a command does or prints. `env` (a request's) is the job's whole environment.
        base = base_environment(os.environ if self.env is None else self.env, secret_values=known_secrets())
        if env:
            base.update(env)
        limit = self.timeout_s if timeout_s is None else timeout_s
        run = argv
        killer = shutil.which("timeout", path=base.get("PATH")) if hard_limit else None
        if killer:
            run = [killer, "-s", "KILL", f"{max(1, int(limit))}", *argv]
        started = time.monotonic()
        outcome = "error"
        try:
            with anyio.fail_after(limit + (1 if killer else 0)):
                proc = await anyio.run_process(run, env=base, cwd=cwd, check=False)
            if killer and proc.returncode == _KILLED_BY_TIMEOUT:
                outcome = "timeout"
                raise SlurmUnavailable(f"{what or name} did not finish within {limit:.0f}s: killed")
            outcome = "ok" if proc.returncode == 0 else "error"
            return proc
        except TimeoutError as exc:
            outcome = "timeout"
            raise SlurmUnavailable(f"{what or name} did not answer within {limit:.0f}s") from exc
        except OSError as exc:
            raise SlurmUnavailable(f"could not run {argv[0]}: {exc}") from exc
        finally:
            if self.on_call is not None:
                self.on_call(name, time.monotonic() - started, outcome)

    def _fail(self, argv: list[str], proc: subprocess.CompletedProcess[bytes]) -> SlurmError:
        err = proc.stderr.decode(errors="replace").strip() or proc.stdout.decode(errors="replace").strip()
        msg = f"{Path(argv[0]).name} exited {proc.returncode}: {err[:500]}"
        return SlurmUnavailable(msg) if looks_unreachable(err) or proc.returncode < 0 else SlurmRejected(msg)

    def _check_fence(self) -> None:
        if self.fence is None:
            return
        try:
            self.fence(self.timeout_s)  # valid for as long as the command may take
        except Exception as exc:
            raise Fenced(f"not acting: {exc}") from exc

    async def submit(self, req: SubmitRequest) -> str:
        """Run sbatch; returns the job id. Raises Fenced, SlurmUnavailable or SlurmRejected."""
        self._check_fence()
        argv = [self._exe("sbatch"), "--parsable", *req.options, str(req.script), *req.script_args]
        proc = await self._run(argv, env=req.env, cwd=req.workdir, hard_limit=True)
        if proc.returncode != 0:
            raise self._fail(argv, proc)
        try:
            return parse_sbatch_parsable(proc.stdout.decode(errors="replace"))
        except ValueError as exc:
            raise SlurmUnavailable(str(exc)) from exc

    async def squeue(self) -> list[JobObservation]:
        """Every job of our user in one call (all states still in slurmctld's memory)."""
        argv = [self._exe("squeue"), "-h", "-t", "all", "-u", self.user, "-o", SQUEUE_FORMAT]
        proc = await self._run(argv)
        if proc.returncode != 0:
            raise self._fail(argv, proc)
        jobs, problems = parse_squeue(proc.stdout.decode(errors="replace"))
        _log_problems("squeue", problems, self.unknown_state_words)
        return jobs

    async def sacct(self, job_ids: Iterable[str] = (), names: Iterable[str] = ()) -> list[JobObservation]:
        """Final states of jobs that left the queue: slurmdbd when present, else the jobcomp file.

        `names` finds jobs whose id we never learnt (an intent interrupted by a crash);
        sacct ANDs its filters, so ids and names are asked in separate calls.
        """
        ids = sorted(set(job_ids), key=lambda s: (len(s), s))
        wanted = sorted(set(names))
        found: list[JobObservation] = []
        if ids:
            found += await self._sacct(["-j", ",".join(ids)])
        if wanted:
            reader = await self._jobcomp_reader()
            if reader is not None:
                try:
                    found += await anyio.to_thread.run_sync(reader.lookup, wanted)
                    return found
                except OSError as exc:
                    log.warning("jobcomp file unreadable", path=str(reader.path), error=str(exc))
                    self.jobcomp = False
            found += await self._sacct(["--name", ",".join(wanted), "-S", "now-7days", "-E", "now"])
        return found

    async def _jobcomp_reader(self) -> JobcompReader | None:
        """The incremental jobcomp reader when Slurm keeps no accounting (no slurmdbd) and its jobcomp/filetxt
        file is readable here; asked of `scontrol show config` once."""
        if self.has_accounting is True or self.jobcomp is False:
            return None
        if isinstance(self.jobcomp, JobcompReader):
            return self.jobcomp
        argv = [self._exe("scontrol"), "show", "config"]
        proc = await self._run(argv)
        if proc.returncode != 0:
            raise self._fail(argv, proc)
        config = parse_scontrol_config(proc.stdout.decode(errors="replace"))
        # 22.05 says accounting_storage/none, 24.11 (null): either way no slurmdbd. With one, sacct filters by
        # name itself (whether it answers is for _sacct to learn).
        if config.get("AccountingStorageType", "(null)") not in ("(null)", "", "accounting_storage/none"):
            self.jobcomp = False
            return None
        loc = Path(config.get("JobCompLoc", ""))
        filetxt = config.get("JobCompType") == "jobcomp/filetxt"
        if not (filetxt and loc.is_absolute() and os.access(loc, os.R_OK)):
            log.info("jobcomp file not readable here: lost intents are asked of sacct -c", path=str(loc))
            self.jobcomp = False
            return None
        self.has_accounting = False
        self.jobcomp = JobcompReader(loc)
        return self.jobcomp

    async def _sacct(self, select: list[str]) -> list[JobObservation]:
        base = [self._exe("sacct"), "-P", "-n", "-X", "-o", ",".join(SACCT_FIELDS), *select]
        with_c = [base[0], "-c", *base[1:]]
        argv = with_c if self.has_accounting is False else base
        proc = await self._run(argv)
        if proc.returncode != 0 and self.has_accounting is None:
            err = proc.stderr.decode(errors="replace")
            if "accounting storage is disabled" in err.lower():
                self.has_accounting = False
                argv = with_c
                proc = await self._run(argv)
        if proc.returncode != 0:
            raise self._fail(argv, proc)
        if self.has_accounting is None:
            self.has_accounting = True
        jobs, problems = parse_sacct(proc.stdout.decode(errors="replace"))
        _log_problems("sacct", problems, self.unknown_state_words)
        return jobs

    async def job_nodes(self, job_id: str) -> str:
        """The node list of one job (rare: only when evidence must name the node to exclude)."""
        argv = [self._exe("squeue"), "-h", "-t", "all", "-j", job_id, "-o", "%N"]
        proc = await self._run(argv)
        if proc.returncode != 0:
            raise self._fail(argv, proc)
        return proc.stdout.decode(errors="replace").strip()

    async def node_at(self, address: str, nodelist: str) -> str | None:
        """The node name of an address among a job's nodes (Slurm's NodeAddr, else reverse DNS); None when
        neither tells."""
        argv = [self._exe("sinfo"), "-h", "-N", "-n", nodelist, "-o", "%N %o %n"]
        proc = await self._run(argv)
        if proc.returncode != 0:
            raise self._fail(argv, proc)
        text = proc.stdout.decode(errors="replace")
        found = node_for_address(text, address)
        if found is not None:
            return found
        with anyio.move_on_after(5.0):  # a resolver that hangs must not hold up the decision
            name = await anyio.to_thread.run_sync(_reverse_dns, address, abandon_on_cancel=True)
            return node_for_address(text, address, name) if name else None
        return None

    async def hostnames(self, nodelist: str) -> list[str]:
        """`node[1-2]` -> `node1`, `node2` (Slurm's own expansion: `scontrol show hostnames`)."""
        if not nodelist.strip():
            return []
        argv = [self._exe("scontrol"), "show", "hostnames", nodelist]
        proc = await self._run(argv)
        if proc.returncode != 0:
            raise self._fail(argv, proc)
        return proc.stdout.decode(errors="replace").split()

    async def run_in_job(
        self, job_id: str, node: str, argv: list[str], *, timeout_s: float
    ) -> subprocess.CompletedProcess[bytes]:
        """One task of `argv` on `node` inside the running job, beside its steps (`srun --overlap`), killed
        after `timeout_s`: what act/forensics.py uses to look inside a hung job before it is cancelled."""
        full = [
            self._exe("srun"),
            "--overlap",
            f"--jobid={job_id}",
            f"--nodelist={node}",
            "--nodes=1",
            "--ntasks=1",
            "--quiet",
            *argv,
        ]
        return await self._run(full, timeout_s=timeout_s, what=f"srun on {node}")

    async def show_job(self, job_id: str) -> dict[str, str]:
        """`scontrol show job` of one job (its state, user, work dir, output file...)."""
        argv = [self._exe("scontrol"), "show", "job", "-o", job_id]
        proc = await self._run(argv)
        if proc.returncode != 0:
            raise self._fail(argv, proc)
        fields = parse_scontrol_job(proc.stdout.decode(errors="replace"))
        if fields.get("JobId") != job_id:
            raise SlurmRejected(f"scontrol show job {job_id}: no such job")
        return fields

    async def nodes(self) -> list[SlurmNode]:
        """Every node of the cluster (`scontrol -o show node`): its address, hostname and partitions."""
        argv = [self._exe("scontrol"), "-o", "show", "node"]
        proc = await self._run(argv)
        if proc.returncode != 0:
            raise self._fail(argv, proc)
        return parse_scontrol_nodes(proc.stdout.decode(errors="replace"))

    async def node_state(self, node: str) -> str | None:
        """One node's `State=` (`scontrol -o show node NODE`), None when Slurm does not know the node."""
        argv = [self._exe("scontrol"), "-o", "show", "node", node]
        proc = await self._run(argv)
        if proc.returncode != 0:
            raise self._fail(argv, proc)
        found = [n for n in parse_scontrol_nodes(proc.stdout.decode(errors="replace")) if n.name == node]
        return found[0].state if found else None

    async def test_only(self, req: SubmitRequest) -> str:
        """`sbatch --test-only`: whether Slurm would accept the request (account, partition, QOS, time, GRES),
        without submitting anything. Returns Slurm's estimate; raises SlurmRejected with Slurm's reason."""
        argv = [self._exe("sbatch"), "--test-only", *req.options, str(req.script), *req.script_args]
        proc = await self._run(argv, env=req.env, cwd=req.workdir)
        if proc.returncode != 0:
            raise self._fail(argv, proc)
        return (proc.stderr.decode(errors="replace") + proc.stdout.decode(errors="replace")).strip()

    async def version(self) -> str:
        """`sinfo --version`, e.g. `slurm 22.05.8`."""
        argv = [self._exe("sinfo"), "--version"]
        proc = await self._run(argv)
        if proc.returncode != 0:
            raise self._fail(argv, proc)
        return proc.stdout.decode(errors="replace").strip()

    async def ping(self) -> str:
        """`scontrol ping`: whether the controller answers (its own words)."""
        argv = [self._exe("scontrol"), "ping"]
        proc = await self._run(argv)
        out = proc.stdout.decode(errors="replace").strip()
        if proc.returncode != 0 or "DOWN" in out:
            raise SlurmUnavailable(out or proc.stderr.decode(errors="replace").strip())
        return out

    async def controller_time(self) -> float:
        """The controller's clock: sdiag's header `sdiag output at <date> (<epoch>)` is slurmctld's time."""
        argv = [self._exe("sdiag")]
        proc = await self._run(argv)
        if proc.returncode != 0:
            raise self._fail(argv, proc)
        return parse_sdiag_time(proc.stdout.decode(errors="replace"))

    async def cancel(self, job_id: str, *, signal: str | None = None) -> None:
        self._check_fence()
        argv = [self._exe("scancel"), *(["--signal", signal] if signal else []), job_id]
        proc = await self._run(argv, hard_limit=True)
        if proc.returncode != 0:
            raise self._fail(argv, proc)

    async def hold(self, job_id: str) -> None:
        await self._control("hold", job_id)

    async def release(self, job_id: str) -> None:
        await self._control("release", job_id)

    async def _control(self, verb: str, job_id: str) -> None:
        self._check_fence()
        argv = [self._exe("scontrol"), verb, job_id]
        proc = await self._run(argv, hard_limit=True)
        if proc.returncode != 0:
            raise self._fail(argv, proc)


def _reverse_dns(address: str) -> str | None:
    try:
        return socket.gethostbyaddr(address)[0]
    except OSError:
        return None
