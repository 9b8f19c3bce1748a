"""The dev Slurm cluster is a real one: jobs run, fake GPUs are allocated, the controller can be stopped."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from .conftest import DEV_CLUSTER, REPO, SlurmCluster

pytestmark = pytest.mark.slurm


def test_up_is_idempotent_and_prints_the_conf_path(slurm_cluster: SlurmCluster) -> None:
    again = subprocess.run(
        [str(DEV_CLUSTER), "up", *slurm_cluster.args], capture_output=True, text=True, timeout=120, check=True
    )
    expected = [f"SLURM_CONF={slurm_cluster.conf}"]
    if "SHEPHERD_SLURM__BIN_DIR" in slurm_cluster.env:  # a version in its own root: its client wrappers
        expected.append(f"SLURM_BIN_DIR={slurm_cluster.env['SHEPHERD_SLURM__BIN_DIR']}")
    assert again.stdout.strip().splitlines() == expected
    assert Path(slurm_cluster.conf).is_file()
    status = subprocess.run([str(DEV_CLUSTER), "status"], capture_output=True, text=True, timeout=60)
    assert status.returncode == 0, status.stdout
    assert "slurmctld: running" in status.stdout


def test_a_trivial_job_completes(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    job = slurm_cluster.sbatch("-o", str(tmp_path / "%j.out"), "--wrap", "echo trivial-ok", cwd=tmp_path)
    assert slurm_cluster.wait_final(job) == "COMPLETED"
    assert slurm_cluster.exit_code(job) == "0:0"
    assert "trivial-ok" in (tmp_path / f"{job}.out").read_text()


def test_a_job_runs_the_checkouts_python_and_slurms_clients(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    # 24.11 runs jobs inside its own root: the checkout and the venv's interpreter are bound in (same paths);
    # the client wrappers a job finds first on PATH (inherited) run the root's clients directly.
    python = REPO / ".venv" / "bin" / "python"
    if not python.exists():
        pytest.skip("no .venv")
    job = slurm_cluster.sbatch(
        "-o",
        str(tmp_path / "%j.out"),
        "--wrap",
        f"{python} -c 'import ssl, ctypes, supervisor; print(supervisor.__file__)' && "
        'echo "nodes=$(scontrol show hostnames "$SLURM_JOB_NODELIST")" && srun true',
        cwd=tmp_path,
    )
    assert slurm_cluster.wait_final(job) == "COMPLETED", (tmp_path / f"{job}.out").read_text()
    out = (tmp_path / f"{job}.out").read_text()
    assert str(REPO / "supervisor") in out
    assert f"nodes={slurm_cluster.nodes()[0]}" in out


def test_pyxis_options_reach_the_step_and_node_names_resolve(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    # Both versions load the pyxis stand-in (built against their own spank.h) and give steps the
    # cluster's hosts file.
    node = slurm_cluster.nodes()[0]
    job = slurm_cluster.sbatch(
        "-o",
        str(tmp_path / "%j.out"),
        "--wrap",
        f"srun --container-image=nvcr.io/x:1 --container-workdir={tmp_path} --no-container-mount-home "
        "sh -c 'echo image=$SHEPHERD_PYXIS_IMAGE home=$SHEPHERD_PYXIS_MOUNT_HOME pwd=$(pwd); "
        f"getent hosts {node}'",
        cwd=tmp_path,
    )
    assert slurm_cluster.wait_final(job) == "COMPLETED", (tmp_path / f"{job}.out").read_text()
    out = (tmp_path / f"{job}.out").read_text()
    assert f"image=nvcr.io/x:1 home=0 pwd={tmp_path}" in out
    assert node in out.split("\n", 1)[1]


def test_a_job_exiting_3_is_failed_with_exit_code_3(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    job = slurm_cluster.sbatch("-o", str(tmp_path / "%j.out"), "--wrap", "exit 3", cwd=tmp_path)
    assert slurm_cluster.wait_final(job) == "FAILED"
    assert slurm_cluster.exit_code(job) == "3:0"


def test_fake_gpus_two_requested_two_visible(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    job = slurm_cluster.sbatch(
        "--gres=gpu:2",
        "-o",
        str(tmp_path / "%j.out"),
        "--wrap",
        "echo CVD=$CUDA_VISIBLE_DEVICES",
        cwd=tmp_path,
    )
    assert slurm_cluster.wait_final(job) == "COMPLETED"
    line = next(x for x in (tmp_path / f"{job}.out").read_text().splitlines() if x.startswith("CVD="))
    assert len(line.removeprefix("CVD=").split(",")) == 2


def test_the_node_advertises_cpus_memory_and_gpus(slurm_cluster: SlurmCluster) -> None:
    out = (
        slurm_cluster.run("sinfo", "-h", "-N", "-p", "debug", "-o", "%N %c %m %G")
        .stdout.split("\n")[0]
        .split()
    )
    assert int(out[1]) >= 4 and int(out[2]) >= 8000 and out[3].startswith("gpu:")


def test_while_slurmctld_is_stopped_squeue_fails_and_it_comes_back(slurm_cluster: SlurmCluster) -> None:
    slurm_cluster.ctld_stop()
    try:
        down = slurm_cluster.run("squeue", "-h", check=False, timeout=60)
        assert down.returncode != 0
        assert "Unable to contact slurm controller" in down.stderr
    finally:
        slurm_cluster.ctld_start()
    assert slurm_cluster.run("squeue", "-h").returncode == 0
