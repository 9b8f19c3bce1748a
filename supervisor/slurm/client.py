"""A small async Slurm client: argv lists in, typed observations out.

Every call has a timeout. A command that fails or times out raises
`SlurmUnavailable` (we could not look) or `SlurmRejected` (Slurm said no);
callers must never read either as "the job finished".
"""

from __future__ import annotations

import getpass
import os
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import structlog

from supervisor.slurm.parse import (
    SACCT_FIELDS,
    SQUEUE_FORMAT,
    JobObservation,
    ParseProblem,
    looks_unreachable,
    parse_sacct,
    parse_sbatch_parsable,
    parse_scontrol_job,
    parse_squeue,
)

log = structlog.get_logger(__name__)


MAX_PROBLEMS_LOGGED = 5  # per call: thousands of garbage lines must not flood the log


def _log_problems(cmd: str, problems: list[ParseProblem]) -> None:
    for p in problems[:MAX_PROBLEMS_LOGGED]:
        log.warning(f"{cmd} line not understood", line_no=p.line_no, line=p.line[:200], reason=p.reason)
    if len(problems) > MAX_PROBLEMS_LOGGED:
        log.warning(f"{cmd}: more lines not understood", count=len(problems) - MAX_PROBLEMS_LOGGED)


class SlurmError(Exception):
    """Base class: a Slurm command did not give us an answer we can use."""


class SlurmUnavailable(SlurmError):
    """We could not ask (controller down, timeout, munge): says nothing about any job."""


class SlurmRejected(SlurmError):
    """Slurm answered and refused (invalid option, unknown account): retrying the same won't help."""


@dataclass(frozen=True, slots=True)
class SubmitRequest:
    """Everything `sbatch` needs, as data: options, the batch script and the driver's argv."""

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
    ) -> None:
        self.timeout_s = timeout_s
        self.bin_dir = bin_dir
        self.env = dict(env) if env is not None else None
        self.user = user or getpass.getuser()
        self.stats = SlurmCallStats()
        self.has_accounting: bool | None = None  # learnt on first sacct
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
        timeout_s: float | None = None,
        what: str = "",
    ) -> subprocess.CompletedProcess[bytes]:
        name = Path(argv[0]).name
        self.stats.count(name)
        base = dict(os.environ) if self.env is None else dict(self.env)
        if env:
            base.update(env)
        started = time.monotonic()
        outcome = "error"
        try:
            limit = self.timeout_s if timeout_s is None else timeout_s
            with anyio.fail_after(limit):
                proc = await anyio.run_process(argv, env=base, cwd=cwd, check=False)
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

    async def submit(self, req: SubmitRequest) -> str:
        """Run sbatch; returns the job id. Raises SlurmUnavailable or SlurmRejected."""
        argv = [self._exe("sbatch"), "--parsable", *req.options, str(req.script), *req.script_args]
        proc = await self._run(argv, env=req.env, cwd=req.workdir)
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
        _log_problems("squeue", problems)
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
            found += await self._sacct(["--name", ",".join(wanted), "-S", "now-7days", "-E", "now"])
        return found

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
        _log_problems("sacct", problems)
        return jobs

    async def job_nodes(self, job_id: str) -> str:
        """The node list of one job (rare: only when evidence must name the node to exclude)."""
        argv = [self._exe("squeue"), "-h", "-t", "all", "-j", job_id, "-o", "%N"]
        proc = await self._run(argv)
        if proc.returncode != 0:
            raise self._fail(argv, proc)
        return proc.stdout.decode(errors="replace").strip()

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

    async def cancel(self, job_id: str, *, signal: str | None = None) -> None:
        argv = [self._exe("scancel"), *(["--signal", signal] if signal else []), job_id]
        proc = await self._run(argv)
        if proc.returncode != 0:
            raise self._fail(argv, proc)

    async def hold(self, job_id: str) -> None:
        await self._control("hold", job_id)

    async def release(self, job_id: str) -> None:
        await self._control("release", job_id)

    async def _control(self, verb: str, job_id: str) -> None:
        argv = [self._exe("scontrol"), verb, job_id]
        proc = await self._run(argv)
        if proc.returncode != 0:
            raise self._fail(argv, proc)
