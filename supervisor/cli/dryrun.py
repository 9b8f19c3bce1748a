"""`shepherd submit --dry-run`: what the first attempt's sbatch would be, built by the daemon's own request
builder, so a person can read the line, the job's environment and COMMAND before anything is queued; secret
values are masked, never printed."""

from __future__ import annotations

import shlex
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from supervisor.domain.envfiles import EnvFileError, read_private_env_file
from supervisor.domain.overrides import AttemptOverrides
from supervisor.domain.spec import JobSpec
from supervisor.intake.queue import new_run_id
from supervisor.redact import MASK, MIN_SECRET_LEN, is_secret_key, redact
from supervisor.settings import Settings
from supervisor.slurm.client import SubmitRequest
from supervisor.slurm.command import as_shell, driver_command
from supervisor.slurm.launchers.runner import script_path
from supervisor.slurm.submit import base_log_dir, build_submit_request


def dry_run_lines(
    request: SubmitRequest, command: str, secret_names: set[str], secret_values: set[str]
) -> list[str]:
    """The sbatch line, every variable of the job's environment (a secret's value masked) and COMMAND."""
    values = [v for v in secret_values if len(v) >= MIN_SECRET_LEN]
    argv = ["sbatch", "--parsable", *request.options, str(request.script), *request.script_args]
    out = [
        f"cd {shlex.quote(str(request.workdir))} && {redact(shlex.join(argv), values)}",
        "",
        "environment:",
    ]
    for name in sorted(request.env):
        if name == "COMMAND":
            continue  # shown whole below
        secret = name in secret_names or is_secret_key(name) or any(s in request.env[name] for s in values)
        out.append(f"  {name}={MASK + '  (secret)' if secret else redact(request.env[name], values)}")
    out += ["", f"COMMAND: {redact(command, values)}"]
    return out


def print_dry_run(settings: Settings, spec: JobSpec, path: Path, environ: Mapping[str, str]) -> int:
    """Print what `shepherd submit` would have the daemon run for attempt 1; submits and queues nothing."""
    if spec.workdir is None:  # as submit does: a job runs where it was submitted from
        spec = spec.model_copy(update={"workdir": Path.cwd()})
    secret_env: dict[str, str] = {}
    notes: list[str] = []
    for env_file in spec.env_files:
        try:
            secret_env.update(read_private_env_file(env_file))
        except EnvFileError as exc:
            notes.append(f"env_files: {exc}")
    for name in spec.pass_env:
        if name in environ:
            secret_env[name] = environ[name]
        else:
            notes.append(f"pass_env: {name} is not set in this shell (submit would refuse)")
    try:
        daemon_secrets = settings.slack.secrets()
    except EnvFileError:
        daemon_secrets = []
    run_id = new_run_id(spec.name, time.time())  # an example: the real one is drawn at submission
    overrides = AttemptOverrides()
    run_dir = settings.runs_dir / run_id
    under_runner = spec.resume.in_place  # as the daemon submits it (daemon/loops.py)
    request = build_submit_request(
        spec,
        run_id=run_id,
        attempt=1,
        run_dir=run_dir,
        overrides=overrides,
        python_bin_dir=settings.python.parent if settings.python else Path(sys.executable).parent,
        script=settings.launch_script,
        environ=environ,
        secret_env=secret_env,
        secret_names=settings.slack.secret_env_names(),
        secret_values=daemon_secrets,
        runner_script=script_path(base_log_dir(spec, run_dir), run_id) if under_runner else None,
    )
    command = request.env.get("COMMAND") or as_shell(driver_command(spec, overrides))
    print(f"# {path}: dry run, attempt 1; nothing is submitted or queued")
    if under_runner:
        print("# the driver runs under Shepherd's job-side runner (resume.in_place; docs/policy.md)")
    print(
        "# the base variables come from the daemon's environment at submission; shown here from this shell's"
    )
    for line in dry_run_lines(request, command, set(secret_env), {*secret_env.values(), *daemon_secrets}):
        print(line)
    for note in notes:
        print(f"shepherd: warning: {path}: {note}", file=sys.stderr)
    return 0
