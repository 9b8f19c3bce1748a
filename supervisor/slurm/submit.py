"""Turn (spec, attempt, resume overrides) into one sbatch request: a pure function.

Keeping this pure means the exact argv of every attempt can be tested without
Slurm, and a resume's fix (an env patch, an excluded node) is visibly data.
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

from supervisor.domain.overrides import AttemptOverrides
from supervisor.domain.spec import JobSpec
from supervisor.slurm.client import SubmitRequest
from supervisor.slurm.launchers import layout
from supervisor.slurm.parse import make_comment, make_job_name


def launch_script() -> Path:
    """The ray.sub shipped in the package (sbatch copies it at submit time: an installed path is fine)."""
    return Path(str(resources.files("supervisor.slurm.launchers") / "ray.sub"))


def base_log_dir(spec: JobSpec, run_dir: Path) -> Path:
    return spec.log_dir if spec.log_dir is not None else run_dir / "logs"


def with_checkpoint_dir(argv: list[str], template: list[str], checkpoint_dir: str) -> list[str]:
    """`argv` pointed at `checkpoint_dir`: a `key=` element already there is replaced, the rest appended.

    Replacing keeps one value per key (Hydra-style parsers may refuse the same key twice).
    """
    out = list(argv)
    for t in template:
        arg = t.replace("{checkpoint_dir}", checkpoint_dir)
        prefix = t.split("{checkpoint_dir}", 1)[0]
        at = next((i for i, a in enumerate(out) if prefix.endswith("=") and a.startswith(prefix)), None)
        if at is None:
            out.append(arg)
        else:
            out[at] = arg
    return out


def build_submit_request(
    spec: JobSpec,
    *,
    run_id: str,
    attempt: int,
    run_dir: Path,
    overrides: AttemptOverrides,
    python_bin_dir: Path | None = None,
    script: Path | None = None,
    generation: int | None = None,
) -> SubmitRequest:
    s = spec.slurm
    log_dir = base_log_dir(spec, run_dir)
    opts = [
        f"--job-name={make_job_name(run_id, attempt)}",
        f"--comment={make_comment(run_id, attempt, generation)}",
        f"--nodes={s.nodes}",
        "--ntasks-per-node=1",
        f"--cpus-per-task={s.cpus}",
        f"--output={log_dir}/{layout.OUTPUT_PATTERN}",
        "--export=ALL",
    ]
    if spec.workdir is not None:
        opts.append(f"--chdir={spec.workdir}")
    if s.partition:
        opts.append(f"--partition={s.partition}")
    if s.account:
        opts.append(f"--account={s.account}")
    if s.qos:
        opts.append(f"--qos={s.qos}")
    if s.mem:
        opts.append(f"--mem={s.mem}")
    if s.time:
        opts.append(f"--time={s.time}")
    if s.gpus_per_node:
        opts.append(f"--gres=gpu:{s.gpus_per_node}")
    if s.signal:
        opts.append(f"--signal={s.signal}")
    exclude = sorted({*s.exclude, *overrides.exclude})
    if exclude:
        opts.append(f"--exclude={','.join(exclude)}")
    opts.extend(s.extra_args)
    opts.extend(overrides.sbatch_args)

    argv = spec.argv()
    if overrides.checkpoint and spec.resume.pass_checkpoint:
        argv = [
            *argv,
            *(a.replace("{checkpoint}", overrides.checkpoint) for a in spec.resume.pass_checkpoint),
        ]

    if overrides.checkpoint_dir and spec.resume.checkpoint_dir_arg:
        argv = with_checkpoint_dir(argv, spec.resume.checkpoint_dir_arg, overrides.checkpoint_dir)

    env: dict[str, str] = {}
    path = os.environ.get("PATH", "/usr/bin:/bin")
    if python_bin_dir is not None:
        path = f"{python_bin_dir}{os.pathsep}{path}"
        ray_bin = python_bin_dir / "ray"
        if ray_bin.exists():
            env["SHEPHERD_RAY_BIN"] = str(ray_bin)
    env["PATH"] = path
    env.update(spec.env)
    env.update(overrides.env)
    env["BASE_LOG_DIR"] = str(log_dir)
    env["SHEPHERD_RUN_ID"] = run_id
    env["SHEPHERD_ATTEMPT"] = str(attempt)
    if overrides.checkpoint:
        env["SHEPHERD_RESUME_FROM"] = overrides.checkpoint
    if overrides.checkpoint_dir:
        env["SHEPHERD_CHECKPOINT_DIR"] = overrides.checkpoint_dir
    elif spec.checkpoint is not None:
        env["SHEPHERD_CHECKPOINT_DIR"] = str(spec.checkpoint.dir)
    if spec.container is not None:
        env["CONTAINER"] = spec.container.image
        env["MOUNTS"] = ",".join(spec.container.mounts)
    return SubmitRequest(
        script=script or launch_script(),
        script_args=argv,
        options=opts,
        env=env,
        workdir=spec.workdir or run_dir,
    )
