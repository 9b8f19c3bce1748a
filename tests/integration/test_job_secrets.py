"""A job's environment on the real dev cluster is what its user asked for, through our ray.sub and through
NeMo RL's unmodified one: a daemon started with Slack tokens (and a stray SBATCH_PARTITION) in its environment
runs a spec with an env file and a pass_env name; the job's `env` holds both secrets and no token, and the
store, the spec copy, the daemon's log, the decision's evidence and the Slack messages hold neither secret.
"""

from __future__ import annotations

import json
import secrets
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.daemon import REPO, SHEPHERD, DaemonProcess, wait_for
from tests.support.raylock import ray_users
from tests.support.standin_thread import StandinThread, slack_env

from .conftest import VENV_BIN, SlurmCluster

pytestmark = [pytest.mark.slurm, pytest.mark.ray]

BOT = "xoxb-1111-2222-" + secrets.token_hex(8)
APP = "xapp-1-A0SECRET-3333-" + secrets.token_hex(8)
# Values no pattern of redact() knows: only the value-based masking of a run's secrets can hide them.
FILE_VALUE = "wandbfile" + secrets.token_hex(10)
PASSED_VALUE = "passvalue" + secrets.token_hex(10)
NEMO_RAYSUB = REPO.parent / "shared" / "third_party" / "nemo-rl" / "ray.sub.main-7ea279a"
FINAL = {"COMPLETED", "FAILED", "GAVE_UP", "CANCELLED"}


@pytest.fixture(scope="module")
def slack() -> Iterator[StandinThread]:
    s = StandinThread().start()
    yield s
    s.stop()


@pytest.fixture(scope="module")
def ray_lock() -> Iterator[None]:
    with ray_users(exclusive=True):  # ray.sub's `ray stop`: no other Ray test runs while its jobs do
        yield


@pytest.fixture(scope="module")
def sup(
    tmp_path_factory: pytest.TempPathFactory,
    slurm_cluster: SlurmCluster,
    slack: StandinThread,
    ray_lock: None,
) -> Iterator[DaemonProcess]:
    if not (VENV_BIN / "ray").exists():
        pytest.skip("ray is not installed in .venv (scripts/setup)")
    env = {
        **slurm_cluster.env,
        **slack_env(slack.standin, "C0SECRETS", BOT, APP),
        "SHEPHERD_SLACK__RETRY_INITIAL_S": "0.2",
        "SHEPHERD_SLACK__GROUP_WAIT_S": "0",
        "SBATCH_PARTITION": "no-such-partition",  # sbatch would take it as --partition, and refuse the job
        "DAEMON_ONLY_SETTING": "from-the-daemons-shell",
    }
    d = DaemonProcess(tmp_path_factory.mktemp("job-secrets") / "root", env=env)
    d.start()
    yield d
    d.stop()


def secret_files(tmp: Path) -> Path:
    f = tmp / "wandb.env"
    f.write_text(f"# W&B\nWANDB_API_KEY={FILE_VALUE}\n")
    f.chmod(0o600)
    return f


def submit(d: DaemonProcess, spec: Path) -> str:
    """`shepherd submit` from a shell that exported the pass_env variable."""
    res = subprocess.run(
        [*SHEPHERD, "--root", str(d.root), "submit", str(spec)],
        env={**d.env, "MY_PASSED_SECRET": PASSED_VALUE},
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert res.returncode == 0, res.stderr
    return res.stdout.strip()


def job_env(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)


def assert_the_job_got_its_secrets_and_no_token(env: dict[str, str]) -> None:
    assert env["WANDB_API_KEY"] == FILE_VALUE and env["MY_PASSED_SECRET"] == PASSED_VALUE
    text = "\n".join(f"{k}={v}" for k, v in env.items())
    assert BOT not in text and APP not in text
    assert not {"SLACK_BOT_TOKEN", "SLACK_APP_TOKEN", "DAEMON_ONLY_SETTING", "SBATCH_PARTITION"} & set(env)
    assert not [k for k in env if k.startswith("SHEPHERD_SLACK__")]


def holding(obj: Any, values: tuple[str, ...], at: str = "") -> list[str]:
    """Where in a JSON-like value one of `values` is (paths, for a failure message that says where)."""
    if isinstance(obj, dict):
        return [p for k, v in obj.items() for p in holding(v, values, f"{at}.{k}")]
    if isinstance(obj, list):
        return [p for i, v in enumerate(obj) for p in holding(v, values, f"{at}[{i}]")]
    return [f"{at}: {obj!s:.300}"] if isinstance(obj, str) and any(v in obj for v in values) else []


def assert_no_secret_value_outside_the_job(d: DaemonProcess, run: str, slack: StandinThread) -> None:
    values = (FILE_VALUE, PASSED_VALUE)
    # The store (every file of it: database, WAL), the spec copy, the daemon's log, the run's status.
    for f in (d.root / "state").rglob("*"):
        if f.is_file():
            data = f.read_bytes()
            assert not any(v.encode() in data for v in values), f
    db = sqlite3.connect(f"file:{d.root / 'state' / 'shepherd.sqlite3'}?mode=ro", uri=True)
    dump = "\n".join(db.iterdump())
    db.close()
    assert "CREATE TABLE" in dump and not any(v in dump for v in values)
    spec_copy = (d.root / "runs" / run / "spec.yaml").read_text()
    assert "pass_env" in spec_copy and not any(v in spec_copy for v in values)
    kept = d.root / "runs" / run / "pass_env.env"
    assert kept.stat().st_mode & 0o777 == 0o600
    # What Shepherd wrote beside the run (forensics, ...): not the job's own logs/, not the kept pass_env.
    for f in (d.root / "runs" / run).rglob("*"):
        if f.is_file() and f != kept and "logs" not in f.relative_to(d.root / "runs" / run).parts:
            assert not any(v.encode() in f.read_bytes() for v in values), f
    log = d.log_text()
    assert run in log and not any(v in log for v in (*values, BOT, APP))
    assert holding(d.status(run), values) == []
    # Slack: what the stand-in received.
    sent = json.dumps(slack.recorded().as_json())
    assert not any(v in sent for v in (*values, BOT, APP))


def test_through_our_ray_sub_the_job_gets_its_secrets_and_they_reach_no_record(
    sup: DaemonProcess, slack: StandinThread, tmp_path: Path
) -> None:
    wandb = secret_files(tmp_path)
    out = tmp_path / "job-env.txt"
    # The job prints its environment, then a failure line holding both secrets, which a default rule knows
    # (cuda-oom): the decision's evidence and the Slack alert quote that line. The command is written so that
    # its own text (ray.sub echoes it) matches no rule.
    command = (
        f"env | tee {out}; c=CUDA; "
        'echo "torch.OutOf""MemoryError: $c out of memory. seen $WANDB_API_KEY and $MY_PASSED_SECRET"; exit 1'
    )
    spec = tmp_path / "ours.yaml"
    spec.write_text(
        "\n".join(
            [
                "name: secrets-ours",
                f"command: {json.dumps(command)}",
                f"workdir: {tmp_path}",
                f"env_files: [{wandb}]",
                "pass_env: [MY_PASSED_SECRET]",
                "env: {RAY_AUTH_MODE: disabled}",
                "slurm: {cpus: 1, time: '00:10:00'}",
                "resume: {max_attempts: 1}",
                "",
            ]
        )
    )
    run = submit(sup, spec)
    final = sup.wait_state(run, FINAL, timeout=240)
    assert final["state"] in ("FAILED", "GAVE_UP"), final  # not refused: SBATCH_PARTITION stayed behind
    assert_the_job_got_its_secrets_and_no_token(job_env(out))
    [decision] = [x for x in final["decisions"] if x["rule"] == "cuda-oom"]
    lines = json.dumps(decision["evidence"])
    assert "CUDA out of memory. seen *** and ***" in lines, lines
    wait_for(
        lambda: "CUDA out of memory" in json.dumps(slack.recorded().as_json()), 60, 0.5, "the Slack alert"
    )
    assert_no_secret_value_outside_the_job(sup, run, slack)


@pytest.mark.ray_stop  # NeMo RL's ray.sub runs `ray stop`
def test_through_nemo_rls_unmodified_ray_sub_every_srun_step_gets_the_secrets_and_no_token(
    sup: DaemonProcess, slack: StandinThread, tmp_path: Path
) -> None:
    if not NEMO_RAYSUB.is_file():
        pytest.skip(f"no NeMo RL ray.sub at {NEMO_RAYSUB}")
    wandb = secret_files(tmp_path)
    out = tmp_path / "driver-env.txt"
    spec = tmp_path / "nemo.yaml"
    spec.write_text(
        "\n".join(
            [
                "name: secrets-nemo",
                f"command: {json.dumps(f'env > {out}')}",  # the driver, inside ray.sub's head srun step
                f"workdir: {tmp_path}",
                f"launcher: {{kind: nemo-rl, script: {NEMO_RAYSUB}}}",
                "slurm: {account: shepherd, partition: gpu, nodes: 1, gpus_per_node: 4, time: '00:10:00'}",
                f"container: {{image: nvcr.io/nvidia/nemo-rl:v0.6.0, mounts: ['{tmp_path}:{tmp_path}']}}",
                "env: {RAY_AUTH_MODE: disabled}",  # else `ray status` fails once ~/.ray/auth_token exists
                f"env_files: [{wandb}]",
                "pass_env: [MY_PASSED_SECRET]",
                "resume: {max_attempts: 1, deadline_arg: null}",
                "",
            ]
        )
    )
    run = submit(sup, spec)
    final = sup.wait_state(run, FINAL, timeout=300)
    assert final["state"] == "COMPLETED", final
    env = job_env(out)
    assert env.get("SHEPHERD_PYXIS_STANDIN") == "1"  # it ran in ray.sub's containerised srun step
    assert_the_job_got_its_secrets_and_no_token(env)
    assert_no_secret_value_outside_the_job(sup, run, slack)
