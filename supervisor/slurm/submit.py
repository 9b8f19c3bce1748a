"""Turn (spec, attempt, resume overrides) into one sbatch request: a pure function.

Keeping this pure means the exact argv of every attempt can be tested without Slurm, and a resume's fix
(an env patch, an excluded node, an extra mount) is visibly data. What differs between launchers (how the
driver is handed over, which sbatch options, which env) is asked of the launcher's own module.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path

from supervisor.domain.overrides import AttemptOverrides
from supervisor.domain.spec import JobSpec
from supervisor.slurm.client import SubmitRequest
from supervisor.slurm.command import as_argv, as_shell, driver_command
from supervisor.slurm.jobenv import base_environment
from supervisor.slurm.launchers import layout, nemo_rl, runner, shepherd
from supervisor.slurm.launchers.layout import FileContract
from supervisor.slurm.parse import make_comment, make_job_name


def base_log_dir(spec: JobSpec, run_dir: Path) -> Path:
    return spec.log_dir if spec.log_dir is not None else run_dir / "logs"


def attempt_log_base(
    spec: JobSpec, run_dir: Path, overrides: Mapping[str, object]
) -> tuple[Path, Path | None]:
    """Where an attempt's job writes: its log folder base, and its Slurm output file when not the launcher's
    default (None). An adopted job (submitted by hand) keeps the paths it was adopted with."""
    adopted = overrides if overrides.get("adopted") else {}
    base, output = adopted.get("log_base"), adopted.get("output")
    return (
        Path(str(base)) if base else base_log_dir(spec, run_dir),
        Path(str(output)) if output else None,
    )


def file_contract(spec: JobSpec) -> FileContract:
    """What the files of this spec's jobs mean (its launcher's contract)."""
    return nemo_rl.CONTRACT if spec.launcher.kind == "nemo-rl" else shepherd.CONTRACT


def _mounted_as_is(mount: str, path: Path) -> bool:
    """`mount` (pyxis' SRC[:DST[:FLAGS]]) shows `path` inside the container at the same path."""
    parts = mount.split(":")
    src, dst = parts[0], parts[1] if len(parts) > 1 else parts[0]
    return src == dst and (Path(dst) == path or Path(dst) in path.parents)


def container_mounts(spec: JobSpec, overrides: AttemptOverrides, ours: Sequence[Path] = ()) -> list[str]:
    """The spec's mounts, the resume fix's, then `ours` (what Shepherd's own files in the job need: the log
    folder, where the runner lives), each at its own path, unless a mount shows it as it is already."""
    own = spec.container.mounts if spec.container is not None else []
    mounts = list(dict.fromkeys([*own, *overrides.mounts]))
    for p in ours:
        if not any(_mounted_as_is(m, p) for m in mounts):
            mounts.append(f"{p}:{p}")
    return mounts


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
    environ: Mapping[str, str],
    secret_env: Mapping[str, str] | None = None,
    secret_names: Collection[str] = (),
    secret_values: Collection[str] = (),
    runner_script: Path | None = None,
) -> SubmitRequest:
    """The request of one attempt. Its `env` is the job's whole environment (sbatch runs with exactly it):
    the documented base of `environ` (the daemon's; jobenv.py), the spec's `env`, `secret_env` (the run's
    env_files and pass_env values, read by the caller), the resume fix's env, then the launcher's and
    Shepherd's own variables. `secret_names`/`secret_values`: the daemon's own secrets, never passed on.
    `runner_script`: the driver runs under Shepherd's job-side runner (runner.script_path, in the log folder,
    which a container gets mounted at its own path)."""
    s = spec.slurm
    log_dir = base_log_dir(spec, run_dir)
    nemo = spec.launcher.kind == "nemo-rl"
    opts = [
        f"--job-name={make_job_name(run_id, attempt)}",
        f"--comment={make_comment(run_id, attempt, generation)}",
        f"--nodes={s.nodes + s.spare_nodes}",
        *(["--no-kill"] if s.spare_nodes else []),  # one node's failure must not end a job with spares
        *([] if nemo else shepherd.options(s.cpus)),
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

    command = driver_command(spec, overrides)
    env = base_environment(environ, secret_names=secret_names, secret_values=secret_values)
    if python_bin_dir is not None:
        env["PATH"] = f"{python_bin_dir}{os.pathsep}{env['PATH']}"
        ray_bin = python_bin_dir / "ray"
        if ray_bin.exists():
            env["SHEPHERD_RAY_BIN"] = str(ray_bin)
    env.update(spec.env)
    env.update(secret_env or {})
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
    shell = as_shell(command)
    argv = as_argv(command)
    ours: list[Path] = []
    if runner_script is not None:  # the runner, its folders and its words: all in the log folder
        env[runner.ENV_WAIT] = str(spec.resume.in_place_wait_s)
        shell, argv = runner.wrap_shell(shell, runner_script), runner.wrap(argv, runner_script)
        ours = [log_dir, runner_script.parent]
    mounts = container_mounts(spec, overrides, list(dict.fromkeys(ours)))
    if nemo:
        image = spec.container.image if spec.container is not None else ""
        env.update(nemo_rl.env(shell, image, mounts, s.gpus_per_node))
        return SubmitRequest(
            script=spec.launcher.script or Path("ray.sub"),
            script_args=[],
            options=opts,
            env=env,
            workdir=spec.workdir or run_dir,
        )
    if spec.container is not None:
        env["CONTAINER"] = spec.container.image
        env["MOUNTS"] = ",".join(mounts)
    return SubmitRequest(
        script=script or shepherd.script(),
        script_args=argv,
        options=opts,
        env=env,
        workdir=spec.workdir or run_dir,
    )
