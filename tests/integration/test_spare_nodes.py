"""Spare nodes on real Slurm and real Ray (issue 31): a job with `slurm.spare_nodes: 1` on the 2-node dev
cluster (our ray.sub: Ray's head on the first node, a worker on the second) whose driver reports a GPU fault
naming the worker node. Shepherd drains that node out of the job's Ray cluster (Ray's drain, never `ray stop`:
every node here shares the host's processes, so stopping Ray on one would stop it on all) and restarts the
driver in place; the spare gone, the next fault on it resubmits with `--exclude`.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest

from tests.support.daemon import REPO, DaemonProcess, wait_for

from .conftest import VENV_BIN, SlurmCluster

STANDIN = REPO / "tests" / "support" / "nemo_rl_standin.py"

pytestmark = [pytest.mark.slurm, pytest.mark.ray]


@pytest.fixture
def sup(tmp_path: Path, slurm_cluster_2nodes: SlurmCluster) -> Any:
    if not (VENV_BIN / "ray").exists():
        pytest.skip("ray is not installed in .venv (scripts/setup)")
    d = DaemonProcess(tmp_path / "root", env=slurm_cluster_2nodes.env)
    d.start()
    yield d
    d.stop()


def spec(tmp: Path, worker: str, fail_attempts: int) -> Path:
    (tmp / "results").mkdir(parents=True, exist_ok=True)
    argv = ["python", str(STANDIN), f"checkpointing.checkpoint_dir={tmp / 'results'}"]
    argv += ["checkpointing.save_period=2", "--ray", "--steps", "6", "--fail-at", "3", "--failure", "gpu"]
    argv += [
        "--fault-node",
        worker,
        "--fail-attempts",
        str(fail_attempts),
        "--record",
        str(tmp / "rec.jsonl"),
    ]
    lines = [
        "name: spare",
        f"command: {json.dumps(shlex.join(argv))}",
        f"workdir: {tmp}",
        f"checkpoint: {{dir: {tmp / 'results'}, metric: 'val:accuracy'}}",
        "resume: {backoff_s: 0, in_place: true, in_place_wait_s: 60,"
        " checkpoint_dir_arg: ['checkpointing.checkpoint_dir={checkpoint_dir}']}",
        "slurm: {nodes: 1, spare_nodes: 1, cpus: 2, time: '00:10:00'}",
    ]
    path = tmp / "spare.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def worker_node(cluster: SlurmCluster) -> str:
    names = cluster.run("sinfo", "-h", "-N", "-o", "%N").stdout.split()
    return sorted(set(names))[-1]  # ray.sub's head is the first of the job's nodes


def records(tmp: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (tmp / "rec.jsonl").read_text().splitlines()]


def test_a_gpu_fault_on_the_worker_node_drains_it_and_restarts_in_place_on_the_spare(
    sup: DaemonProcess, tmp_path: Path, slurm_cluster_2nodes: SlurmCluster
) -> None:
    worker = worker_node(slurm_cluster_2nodes)
    run = sup.submit(spec(tmp_path, worker, fail_attempts=1))
    final = sup.wait_state(run, {"COMPLETED", "FAILED", "GAVE_UP", "CANCELLED"}, timeout=85)
    status = sup.status(run)
    assert final["state"] == "COMPLETED", status
    first, second = status["attempt_list"]
    assert first["job_id"] == second["job_id"]  # no second sbatch
    assert second["overrides"]["drained"] == [worker] and worker in second["overrides"]["exclude"]
    [d] = [d for d in status["decisions"] if d["rule"] == "cuda-hardware-error"]
    assert f"{worker} drained from its Ray cluster" in d["outcome"], d
    one, two = records(tmp_path)
    # The same Ray cluster (its GCS on the head never stopped), without the worker: Ray 2.60's raylet leaves
    # once drained and idle, its srun step ends, and --no-kill keeps the job.
    assert one["ray"]["nodes"] == 2 and two["ray"]["nodes"] == 1
    assert two["resumed_from"] == 2


def test_the_spare_gone_the_next_gpu_fault_on_it_resubmits_with_exclude(
    sup: DaemonProcess, tmp_path: Path, slurm_cluster_2nodes: SlurmCluster
) -> None:
    worker = worker_node(slurm_cluster_2nodes)
    run = sup.submit(spec(tmp_path, worker, fail_attempts=2))

    def both_decided() -> list[dict[str, Any]] | None:
        ds = [d for d in (sup.status(run) or {}).get("decisions", []) if d["rule"] == "cuda-hardware-error"]
        return ds if len(ds) == 2 and all(d.get("outcome") for d in ds) else None

    first, second = wait_for(both_decided, timeout=85, what="two GPU-fault decisions")
    assert f"{worker} drained" in first["outcome"], first
    assert "in place" not in second["outcome"] and f"--exclude={worker}" in second["outcome"], second
    sup.cli("cancel", run, check=False)
