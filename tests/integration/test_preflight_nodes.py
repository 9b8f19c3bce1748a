"""Preflight on the real dev cluster, whose only compute node is this machine: Slurm's own answer about its
nodes lets a spec whose paths are all on this machine's local disks through, with no setting saying so."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from supervisor.domain.spec import JobSpec
from supervisor.preflight.checks import job_nodes, nodes_are_here
from supervisor.preflight.probe import locate, run_preflight
from supervisor.slurm.client import SlurmClient
from tests.integration.conftest import SlurmCluster
from tests.support.daemon import REPO

pytestmark = pytest.mark.slurm


def _client(cluster: SlurmCluster) -> SlurmClient:
    bin_dir = cluster.env.get("SHEPHERD_SLURM__BIN_DIR")
    return SlurmClient(env=cluster.env, bin_dir=Path(bin_dir) if bin_dir else None, timeout_s=30)


def _on_local_disk(path: Path) -> None:
    found = subprocess.run(["stat", "-f", "-c", "%T", str(path)], capture_output=True, text=True).stdout
    if found.strip() not in ("ext2/ext3", "ext4", "xfs", "btrfs", "tmpfs", "overlayfs"):
        pytest.skip(f"{path} is on {found.strip()}, not a local disk here")


def test_slurm_says_the_dev_clusters_nodes_are_this_machine(slurm_cluster: SlurmCluster) -> None:
    nodes = anyio.run(_client(slurm_cluster).nodes)
    assert [n.name for n in nodes] == slurm_cluster.nodes()
    assert all("debug" in n.partitions for n in nodes)
    here, resolved = locate(nodes)
    assert nodes_are_here(job_nodes(nodes, "debug"), here, resolved)
    assert not nodes_are_here(job_nodes(nodes, "nosuch"), here, resolved)


def test_local_paths_pass_preflight_on_the_dev_cluster(tmp_path: Path, slurm_cluster: SlurmCluster) -> None:
    _on_local_disk(tmp_path)
    spec = JobSpec.model_validate(
        {
            "name": "local",
            "command": ["python", "train.py"],
            "workdir": str(tmp_path),
            "checkpoint": {"dir": str(tmp_path / "ck")},
            "trainer_log_dir": str(tmp_path / "logs"),
            "shared_cache_dir": str(tmp_path / "cache"),
        }
    )
    client = _client(slurm_cluster)
    assert anyio.run(lambda: run_preflight(spec, slurm=client, nodes=client, timeout_s=30)) == []
    # Without asking where the nodes are, the same paths are refused: the answer is what lets them through.
    refused = anyio.run(lambda: run_preflight(spec, slurm=None, timeout_s=30))
    assert {p.field for p in refused} == {"workdir", "checkpoint.dir", "trainer_log_dir", "shared_cache_dir"}


def test_submit_queues_a_spec_on_local_disks_with_no_shepherd_setting(
    tmp_path: Path, slurm_cluster: SlurmCluster
) -> None:
    """What a new user on a machine with only local disks does first: `shepherd submit`, nothing set."""
    _on_local_disk(tmp_path)
    spec = tmp_path / "job.yaml"
    spec.write_text(
        f"name: local\ncommand: [python, -c, 'print(1)']\nworkdir: {tmp_path}\n"
        f"checkpoint: {{dir: {tmp_path / 'ck'}}}\nslurm: {{partition: debug}}\n"
    )
    env = {k: v for k, v in {**os.environ, **slurm_cluster.env}.items() if not k.startswith("SHEPHERD_")}
    if "SHEPHERD_SLURM__BIN_DIR" in slurm_cluster.env:  # a Slurm in its own root: its wrappers, as documented
        env["SHEPHERD_SLURM__BIN_DIR"] = slurm_cluster.env["SHEPHERD_SLURM__BIN_DIR"]
    res = subprocess.run(
        [sys.executable, "-m", "supervisor.cli", "--root", str(tmp_path / "root"), "submit", str(spec)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert res.returncode == 0, res.stderr
    run_id = res.stdout.strip()
    assert (tmp_path / "root" / "queue" / f"{run_id}.yaml").is_file()
    assert "local to this login node" not in res.stderr
