"""NeMo RL's own ray.sub, UNMODIFIED, on the dev Slurm cluster (with the pyxis stand-in: no containers).

Each test is one job through tests/support/run_nemo_rl_raysub.sh, which holds /tmp/shepherd-ray.lock from
before sbatch until the job has ended: ray.sub runs `ray stop`, which kills every Ray process of the user on
the machine.

The scripts come from $SHEPHERD_NEMO_RL_DIR (a NeMo RL checkout, or any folder with `ray.sub*` files), else
from `<repo>/../shared/third_party/nemo-rl/`. What each needs from the dev cluster is in docs/dev-cluster.md.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from .conftest import REPO, VENV_BIN, SlurmCluster

pytestmark = [pytest.mark.slurm, pytest.mark.ray, pytest.mark.slow]

HELPER = REPO / "tests" / "support" / "run_nemo_rl_raysub.sh"
SHARED_COPIES = REPO.parent / "shared" / "third_party" / "nemo-rl"
NEMO_RL_DIR = Path(os.environ.get("SHEPHERD_NEMO_RL_DIR") or SHARED_COPIES)
SCRIPTS = sorted(p for p in NEMO_RL_DIR.glob("ray.sub*") if p.is_file()) if NEMO_RL_DIR.is_dir() else []


@pytest.fixture(params=SCRIPTS or [None], ids=[p.name for p in SCRIPTS] or ["no-nemo-rl-scripts"])
def ray_sub(request: pytest.FixtureRequest) -> Path:
    if request.param is None:
        pytest.skip(f"no NeMo RL ray.sub in {NEMO_RL_DIR} (set SHEPHERD_NEMO_RL_DIR)")
    path: Path = request.param
    return path


@pytest.fixture
def nrl_env(slurm_cluster: SlurmCluster, ray_sub: Path) -> dict[str, str]:
    if not (VENV_BIN / "ray").exists():
        pytest.skip("ray is not installed in .venv (scripts/setup)")
    env = dict(slurm_cluster.env)
    # v0.6.0 claims CPUS_PER_WORKER = GPUS_PER_NODE*16 = 64 CPUs for its head step; the dev nodes have 8
    # (later versions read CPUTot from Slurm).
    if "CPUTot" not in ray_sub.read_text():
        env["CPUS_PER_WORKER"] = "8"
    return env


def run(env: dict[str, str], ray_sub: Path, tmp: Path, *args: str) -> dict[str, str]:
    proc = subprocess.run(
        [str(HELPER), "--dir", str(tmp), "--timeout", "240", *args, str(ray_sub)],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,  # the lock may be held by another session's NeMo RL job
    )
    out = dict(line.split("=", 1) for line in proc.stdout.splitlines() if "=" in line)
    what = f"{ray_sub.name} {' '.join(args)}"
    print(f"{what}: {out.get('state')} {out.get('exit_code')} in {out.get('seconds')} s")
    assert proc.returncode == 0, f"{proc.stderr}\n{proc.stdout}\n{slurm_out(out)}"
    return out


def slurm_out(out: dict[str, str], tail: int = 3000) -> str:
    """The job's --output file (ray.sub's set -x trace), its last `tail` characters (0: all)."""
    path = Path(out.get("dir", "/nonexistent")) / f"{out.get('job')}.out"
    return path.read_text()[-tail:] if path.exists() else ""


def test_the_driver_runs_on_the_ray_cluster_and_the_job_completes(
    nrl_env: dict[str, str], ray_sub: Path, tmp_path: Path
) -> None:
    out = run(nrl_env, ray_sub, tmp_path)
    assert (out["state"], out["exit_code"]) == ("COMPLETED", "0:0"), slurm_out(out)
    logs = Path(out["log_dir"])
    assert (logs / "STARTED_RAY_HEAD").exists() and (logs / "ray-head.log").exists()
    assert not (logs / "ENDED").exists()  # written only when bring-up fails
    driver = (logs / "ray-driver.log").read_text()
    assert "driver ok, exiting 0" in driver and "Step 3/3" in driver
    assert "worker_units=4 nodes=1" in driver  # GPUS_PER_NODE x nodes, from ray.sub's --resources
    assert f"ray_cli={VENV_BIN}/ray" in driver  # the venv's ray, through the PATH sbatch exported
    assert "('NAME', 'ray-head')" in driver  # the stand-in saw ray.sub's --container-name


def test_the_drivers_exit_code_is_the_jobs(nrl_env: dict[str, str], ray_sub: Path, tmp_path: Path) -> None:
    out = run(nrl_env, ray_sub, tmp_path, "--exit-code", "3")
    assert (out["state"], out["exit_code"]) == ("FAILED", "3:0"), slurm_out(out)
    logs = Path(out["log_dir"])
    assert (logs / "STARTED_RAY_HEAD").exists()
    assert not (logs / "ENDED").exists()  # a driver's exit is not a bring-up failure
    assert "driver ok, exiting 3" in (logs / "ray-driver.log").read_text()


def test_empty_mounts_fail_bring_up_as_with_pyxis(
    nrl_env: dict[str, str], ray_sub: Path, tmp_path: Path
) -> None:
    """pyxis rejects `--container-mounts=`; the head srun dies at once, ray.sub writes ENDED and exits 1."""
    out = run({**nrl_env, "MOUNTS": ""}, ray_sub, tmp_path)
    assert (out["state"], out["exit_code"]) == ("FAILED", "1:0"), slurm_out(out)
    logs = Path(out["log_dir"])
    assert (logs / "ENDED").exists() and not (logs / "ray-driver.log").exists()
    assert "pyxis stand-in: --container-mounts: argument required" in slurm_out(out, tail=0)
