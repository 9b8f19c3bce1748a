"""The daemon hosted by Slurm itself, for sites without `systemd --user` lingering or that kill long-lived
processes on login nodes: a small one-CPU batch job that queues its own successor and stops cleanly before its
time limit. The root's lease keeps it to one active daemon even while a successor and a login-node daemon run.

Why a successor submitted at start rather than a requeue at the end: a job that is killed (node failure,
OOM, an admin's scancel, SIGKILL at the time limit) runs no trap, but its successor is already queued. The
successor waits on `--dependency=singleton` (one job of that name runs at a time) and on `--begin`, so a
daemon that dies at once is restarted no faster than every `restart_delay_s` (systemd's RestartSec).
"""

from __future__ import annotations

import hashlib
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from supervisor.slurm.client import SlurmClient, SubmitRequest

_WORD = re.compile(r"^[A-Za-z0-9_.,:+-]+$")


@dataclass(frozen=True, slots=True)
class SlurmHosting:
    partition: str | None = None
    qos: str | None = None
    account: str | None = None
    time: str = "1-00:00:00"
    stop_grace_s: int = 120  # SIGTERM this long before the time limit
    restart_delay_s: int = 60
    mem: str = "2G"


def job_name(root: Path) -> str:
    """One name per root, so `singleton` and `scancel --name` address this root's daemon jobs only."""
    return "shepherd-daemon-" + hashlib.sha256(str(root).encode()).hexdigest()[:8]


def render_script(exe: Path, root: Path, script: Path, h: SlurmHosting) -> str:
    """The batch script (pure). `script` is where it is written: the successor is submitted from that path."""
    for label, value in (
        ("partition", h.partition),
        ("qos", h.qos),
        ("account", h.account),
        ("time", h.time),
    ):
        if value is not None and not _WORD.fullmatch(value):
            raise ValueError(f"{label}: {value!r} is not a plain Slurm word")
    name = job_name(root)
    opts = [
        f"--job-name={name}",
        "--nodes=1",
        "--ntasks=1",
        "--cpus-per-task=1",
        f"--mem={h.mem}",
        f"--time={h.time}",
        "--dependency=singleton",
        f"--signal=B:TERM@{h.stop_grace_s}",
        f"--output={root}/service/daemon-%j.log",
        "--open-mode=append",
        *([f"--partition={h.partition}"] if h.partition else []),
        *([f"--qos={h.qos}"] if h.qos else []),
        *([f"--account={h.account}"] if h.account else []),
    ]
    q = shlex.quote
    return "\n".join(
        [
            "#!/bin/bash",
            "# Shepherd's daemon as a Slurm job. Written by `shepherd service install --slurm`.",
            *(f"#SBATCH {o}" for o in opts),
            "set -u",
            "# The successor first: it starts when this job ends, however it ends (singleton), not before",
            f"# {h.restart_delay_s} s from now. Stop both with: scancel --name={name}",
            f'if ! squeue -h -u "$USER" -n {name} -t PENDING -o %i | grep -q .; then',
            f"  sbatch --begin=now+{h.restart_delay_s} {q(str(script))}",
            "fi",
            "export SHEPHERD_HOST_JOB_ID=$SLURM_JOB_ID",
            "# This job's SLURM_* variables must not leak into the training jobs the daemon submits.",
            "for v in $(compgen -e | grep '^SLURM_' | grep -v '^SLURM_CONF$'); do unset \"$v\"; done",
            "# exec: the daemon gets the SIGTERM before the time limit, stops cleanly, releases the lease.",
            f"exec {q(str(exe))} --root {q(str(root))} daemon --log-format json",
            "",
        ]
    )


def render_scrontab(exe: Path, root: Path, h: SlurmHosting, every_min: int = 10) -> str:
    """Lines for `scrontab -e`: Slurm starts the job again at the next matching minute after it ends."""
    opts = [
        f"--job-name={job_name(root)}",
        "--cpus-per-task=1",
        f"--mem={h.mem}",
        f"--time={h.time}",
        f"--signal=B:TERM@{h.stop_grace_s}",
        f"--output={root}/service/daemon-%j.log",
        "--open-mode=append",
        *([f"--partition={h.partition}"] if h.partition else []),
        *([f"--qos={h.qos}"] if h.qos else []),
        *([f"--account={h.account}"] if h.account else []),
    ]
    q = shlex.quote
    return (
        f"#SCRON {' '.join(opts)}\n"
        f"*/{every_min} * * * * exec {q(str(exe))} --root {q(str(root))} daemon --log-format json\n"
    )


async def install_slurm_job(
    exe: Path, root: Path, h: SlurmHosting, slurm: SlurmClient
) -> tuple[Path, str | None]:
    """Write the script under `<root>/service/` and submit it unless a daemon job of this root exists."""
    folder = root / "service"
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "shepherd-daemon.sbatch"
    script.write_text(render_script(exe, root, script, h))
    script.chmod(0o700)
    name = job_name(root)
    if any(o.name == name and not o.state.is_terminal for o in await slurm.squeue()):
        return script, None
    job = await slurm.submit(SubmitRequest(script=script, script_args=[], options=[], env={}, workdir=folder))
    return script, job
