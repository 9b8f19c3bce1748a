"""NeMo RL's ray.sub refuses a GPUS_PER_NODE that is not its partition's GPU GRES count (the dev cluster's
nodes have gpu:4): `shepherd submit` refuses such a spec first, naming the count; with that check skipped,
ray.sub itself refuses the job and `raysub-gres-mismatch` gives the run up instead of resubmitting it.
ray.sub exits before it runs any `ray` command, so this needs no Ray lock."""

from __future__ import annotations

import getpass
import json
from pathlib import Path

import pytest

from tests.support.daemon import DaemonProcess, wait_for

from .conftest import SlurmCluster

pytestmark = [pytest.mark.slurm]

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "third_party" / "nemo-rl"
FINAL = {"COMPLETED", "FAILED", "GAVE_UP", "CANCELLED"}


@pytest.mark.parametrize("script", ["ray.sub.main-7ea279a"])
def test_a_gpus_per_node_that_ray_sub_would_refuse(
    slurm_cluster: SlurmCluster, tmp_path: Path, script: str
) -> None:
    raysub = SHARED / script
    if not raysub.is_file():
        pytest.skip(f"no NeMo RL ray.sub at {raysub}")
    spec = {
        "name": "gres",
        "command": "python -c pass",
        "workdir": str(tmp_path),
        "launcher": {"kind": "nemo-rl", "script": str(raysub)},
        "slurm": {
            "account": "shepherd",
            "partition": "gpu",
            "nodes": 1,
            "gpus_per_node": 2,
            "time": "00:05:00",
        },
        "container": {"image": "nvcr.io/nvidia/nemo-rl:v0.6.0", "mounts": [f"{tmp_path}:{tmp_path}"]},
    }
    path = tmp_path / "gres.yaml"
    path.write_text(json.dumps(spec))
    d = DaemonProcess(tmp_path / "root", env=slurm_cluster.env)
    d.start()
    try:
        refused = d.cli("submit", str(path), check=False)
        assert refused.returncode != 0, refused.stdout
        assert "slurm.gpus_per_node" in refused.stderr and "set slurm.gpus_per_node: 4" in refused.stderr

        # ray.sub takes its nodes whole (--exclusive): jobs an earlier test of this worker left running on its
        # one node would keep this job pending past the wait (seen in clean-ci), so they go first.
        slurm_cluster.run("scancel", "--user", getpass.getuser(), check=False)
        wait_for(
            lambda: not slurm_cluster.run("squeue", "-h", "-o", "%i").stdout.strip(), 60, 0.5, "an idle node"
        )
        path.write_text(json.dumps({**spec, "preflight": {"skip": ["gres"]}}))
        run = d.submit(path)
        final = d.wait_state(run, FINAL, timeout=120)
        status = d.status(run)
        assert final["state"] == "GAVE_UP" and len(status["attempt_list"]) == 1, status
        [decision] = [x for x in status["decisions"] if x["rule"] == "raysub-gres-mismatch"]
        assert "GPUS_PER_NODE=2 but GRES detected is gpu:4" in decision["reason"], decision
    finally:
        d.stop()
