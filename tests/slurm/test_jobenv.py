"""A job's environment is exactly what its user asked for: the documented base of the daemon's environment,
the spec's env and secrets, the fix's env, the launcher's and Shepherd's own variables; never the daemon's
tokens, its SBATCH_* options, its own job's SLURM_* or its SHEPHERD_* settings."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import anyio

from supervisor.domain.overrides import AttemptOverrides
from supervisor.domain.spec import JobSpec
from supervisor.redact import add_known_secrets, clear_known_secrets
from supervisor.slurm.client import SlurmClient, SubmitRequest
from supervisor.slurm.jobenv import base_environment
from supervisor.slurm.submit import build_submit_request

BOT, APP = "xoxb-1111-2222-daemontoken", "xapp-1-A0DAEMON-3333-apptoken"
DAEMON_ENV = {
    "PATH": "/opt/slurm/bin:/usr/bin:/bin",
    "HOME": "/home/me",
    "USER": "me",
    "LOGNAME": "me",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "TZ": "UTC",
    "SLURM_CONF": "/etc/slurm/site.conf",
    "SLACK_BOT_TOKEN": BOT,
    "SLACK_APP_TOKEN": APP,
    "SHEPHERD_SLACK__BOT_TOKEN": BOT,
    "SHEPHERD_SLACK__CHANNEL": "C0123",
    "MY_BOT": "xoxb-custom-named-token",  # the settings name it: slack.bot_token_env = "MY_BOT"
    "SBATCH_PARTITION": "daemons",  # sbatch would read it as --partition
    "SLURM_JOB_ID": "77",  # a Slurm-hosted daemon's own job
    "SLURM_MEM_PER_NODE": "2048",
    "PYTHONPATH": "/home/me/shepherd",
    "VIRTUAL_ENV": "/home/me/shepherd/.venv",
    "TMPDIR": "/login-node-tmp",
    "WANDB_API_KEY": "the-daemons-own-wandb-key",
}
SPEC: dict[str, Any] = {"name": "t", "command": ["python", "-m", "trainer"], "env": {"HF_HOME": "/shared/hf"}}


def job_env(spec: dict[str, Any], **kw: Any) -> dict[str, str]:
    req = build_submit_request(
        JobSpec.model_validate(spec),
        run_id="t-1",
        attempt=1,
        run_dir=Path("/root/runs/t-1"),
        overrides=kw.pop("overrides", AttemptOverrides()),
        environ=DAEMON_ENV,
        secret_names=("SLACK_BOT_TOKEN", "SLACK_APP_TOKEN", "MY_BOT"),
        secret_values=(BOT, APP, "xoxb-custom-named-token"),
        **kw,
    )
    return dict(req.env)


def test_the_base_is_the_documented_few_and_slurm_conf() -> None:
    assert base_environment(DAEMON_ENV, secret_names=("MY_BOT",), secret_values=(BOT,)) == {
        "PATH": "/opt/slurm/bin:/usr/bin:/bin",
        "HOME": "/home/me",
        "USER": "me",
        "LOGNAME": "me",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TZ": "UTC",
        "SLURM_CONF": "/etc/slurm/site.conf",
    }


def test_a_secret_in_a_base_variable_by_accident_stays_out() -> None:
    env = {"PATH": "/usr/bin", "LANG": f"C.UTF-8 {BOT}", "LC_TOKEN": "abc", "HOME": "/home/me"}
    assert base_environment(env, secret_values=(BOT,)) == {"PATH": "/usr/bin", "HOME": "/home/me"}
    assert base_environment({}) == {"PATH": "/usr/local/bin:/usr/bin:/bin"}  # sbatch is still found


def test_our_launchers_job_gets_exactly_the_base_the_spec_the_secrets_the_fix_and_shepherds_own() -> None:
    env = job_env(
        SPEC,
        secret_env={"WANDB_API_KEY": "user-wandb-key-123456", "HF_TOKEN": "hf_userstoken1234567890"},
        overrides=AttemptOverrides(env={"HF_HOME": "/shared/cache/huggingface"}),
        python_bin_dir=Path("/opt/venv/bin"),
    )
    assert set(env) == {
        *("PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "TZ", "SLURM_CONF"),
        "HF_HOME",
        "WANDB_API_KEY",
        "HF_TOKEN",
        *("BASE_LOG_DIR", "SHEPHERD_RUN_ID", "SHEPHERD_ATTEMPT"),
    }
    assert env["PATH"] == "/opt/venv/bin:/opt/slurm/bin:/usr/bin:/bin"
    assert env["HF_HOME"] == "/shared/cache/huggingface"  # the fix wins over the spec
    assert env["WANDB_API_KEY"] == "user-wandb-key-123456"  # the user's, not the daemon's
    assert not any(BOT in v or APP in v or "custom-named" in v for v in env.values())


def test_nemo_rl_gets_what_its_ray_sub_reads_and_nothing_of_the_daemons() -> None:
    nemo = {
        **SPEC,
        "command": "uv run examples/run_grpo.py",
        "launcher": {"kind": "nemo-rl", "script": "/shared/RL/ray.sub"},
        "slurm": {"account": "a", "partition": "p", "gpus_per_node": 8},
        "container": {"image": "nvcr.io/nvidia/nemo-rl:v0.6.0", "mounts": ["/shared:/shared"]},
        "pass_env": ["WANDB_API_KEY"],
    }
    env = job_env(nemo, secret_env={"WANDB_API_KEY": "user-wandb-key-123456"})
    assert {"COMMAND", "CONTAINER", "MOUNTS", "GPUS_PER_NODE", "BASE_LOG_DIR"} <= set(env)
    assert env["WANDB_API_KEY"] == "user-wandb-key-123456"
    leaked = set(env) & {
        "SLACK_BOT_TOKEN",
        "SLACK_APP_TOKEN",
        "SHEPHERD_SLACK__BOT_TOKEN",
        "SBATCH_PARTITION",
    }
    assert not leaked and not any(k.startswith("SLURM_") and k != "SLURM_CONF" for k in env)


def test_sbatch_runs_with_the_requests_environment_and_nothing_of_this_process(
    tmp_path: Path, monkeypatch: Any
) -> None:
    # A stand-in sbatch that records the environment it was started with (what --export=ALL hands the job).
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    seen = tmp_path / "env.txt"
    (bin_dir / "sbatch").write_text(f"#!/bin/sh\nenv > {seen}\necho 42\n")
    (bin_dir / "sbatch").chmod(0o755)
    monkeypatch.setenv("SLACK_BOT_TOKEN", BOT)
    monkeypatch.setenv("SBATCH_PARTITION", "daemons")
    monkeypatch.setenv("SHEPHERD_SLACK__APP_TOKEN", APP)
    add_known_secrets([BOT, APP])
    try:
        req = SubmitRequest(
            script=tmp_path / "job.sh", script_args=[], options=[], env={"WANDB_API_KEY": "user-key-123456"}
        )
        job = anyio.run(lambda: SlurmClient(bin_dir=bin_dir).submit(req))
    finally:
        clear_known_secrets()
    assert job == "42"
    env = dict(line.split("=", 1) for line in seen.read_text().splitlines() if "=" in line)
    assert env["WANDB_API_KEY"] == "user-key-123456" and env["PATH"] == os.environ["PATH"]
    assert not {"SLACK_BOT_TOKEN", "SBATCH_PARTITION", "SHEPHERD_SLACK__APP_TOKEN"} & set(env)
    assert BOT not in seen.read_text() and APP not in seen.read_text()
