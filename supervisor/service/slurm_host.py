"""The daemon hosted by Slurm itself, for sites without `systemd --user` lingering or that kill long-lived
processes on login nodes: a small one-CPU batch job that queues its own successor and stops cleanly before its
time limit. The root's lease keeps it to one active daemon even while a successor and a login-node daemon run.

Why a successor submitted at start rather than a requeue at the end: a job that is killed (node failure,
OOM, an admin's scancel, SIGKILL at the time limit) runs no trap, but its successor is already queued. The
successor waits on `--dependency=singleton` (one job of that name runs at a time) and on `--begin`, so a
daemon that dies at once is restarted no faster than every `restart_delay_s` (systemd's RestartSec).

slurmctld keeps a job's environment, and every process of the job can read it: the daemon's job is submitted
with the base of jobenv.py and the installing shell's SHEPHERD_* settings, never a token; the daemon reads
its Slack tokens from `slack.token_file` (a private file), which `hosting_problem` insists on.
"""

from __future__ import annotations

import hashlib
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from supervisor.domain.envfiles import EnvFileError, read_private_env_file
from supervisor.redact import is_secret_key
from supervisor.settings import SlackSettings
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


# SlackSettings fields that hold a secret (their SHEPHERD_SLACK__* variables never reach the daemon's job).
SECRET_FIELDS = ("bot_token", "app_token", "signing_secret", "webhook_url")
NEEDED = {
    "socket": (("bot_token", "bot_token_env"), ("app_token", "app_token_env")),
    "http": (("bot_token", "bot_token_env"), ("signing_secret", "signing_secret_env")),
    "webhook": (("webhook_url", "webhook_url_env"),),
}


def hosted_environment(environ: Mapping[str, str], slack: SlackSettings) -> dict[str, str]:
    """What the daemon's job gets over jobenv's base (pure): the SHEPHERD_* settings of the installing shell,
    less every secret (a secret-named or Slack secret variable, or a value holding a token of `environ`)."""
    secret_vars = {f"SHEPHERD_SLACK__{f.upper()}" for f in SECRET_FIELDS}
    tokens = [
        v
        for n in (slack.bot_token_env, slack.app_token_env, slack.signing_secret_env, slack.webhook_url_env)
        if (v := environ.get(n))
    ]
    # Where the secrets are (a file, a variable's name) is no secret: the daemon needs it.
    references = {"SHEPHERD_SLACK__TOKEN_FILE"} | {f"SHEPHERD_SLACK__{f.upper()}_ENV" for f in SECRET_FIELDS}
    return {
        k: v
        for k, v in environ.items()
        if k.startswith("SHEPHERD_")
        and k not in secret_vars
        and (k in references or not is_secret_key(k))
        and not any(t in v for t in tokens)
    }


def hosting_problem(slack: SlackSettings, environ: Mapping[str, str]) -> str | None:
    """Why a Slurm-hosted daemon would lack a Slack secret it needs, or None: its job carries none, so each
    must be in shepherd.toml or, better, in `slack.token_file`."""
    needed = NEEDED.get(slack.mode, ())
    try:
        in_file = read_private_env_file(slack.token_file) if slack.token_file is not None else {}
    except EnvFileError as exc:
        return f"slack.token_file: {exc}"
    missing = []
    for field, env_field in needed:
        value = getattr(slack, field)
        in_toml = value is not None and f"SHEPHERD_SLACK__{field.upper()}" not in environ
        env_name = str(getattr(slack, env_field))
        if not in_toml and not in_file.get(env_name):
            missing.append(env_name)
    if not missing:
        return None
    return (
        f"slack.mode={slack.mode}: a Slurm-hosted daemon gets no {', '.join(missing)} from this shell "
        "(slurmctld keeps a job's environment, and every process of the job could read it). Put "
        f"{', '.join(f'{m}=...' for m in missing)} in a private file (chmod 600) and name it in "
        'shepherd.toml: [slack] token_file = "/home/you/.config/shepherd/slack.env"'
    )


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
    exe: Path, root: Path, h: SlurmHosting, slurm: SlurmClient, env: Mapping[str, str] | None = None
) -> tuple[Path, str | None]:
    """Write the script under `<root>/service/` and submit it unless a daemon job of this root exists; `env`
    (hosted_environment's) over the client's base is all the job's environment."""
    folder = root / "service"
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "shepherd-daemon.sbatch"
    script.write_text(render_script(exe, root, script, h))
    script.chmod(0o700)
    name = job_name(root)
    if any(o.name == name and not o.state.is_terminal for o in await slurm.squeue()):
        return script, None
    req = SubmitRequest(script=script, script_args=[], options=[], env=dict(env or {}), workdir=folder)
    job = await slurm.submit(req)
    return script, job
