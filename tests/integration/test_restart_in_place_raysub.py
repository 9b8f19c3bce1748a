"""Restart in place through a real ray.sub (issue 31): ours, and NeMo RL's own, unmodified (main and v0.6.0).

The driver (tests/support/nemo_rl_standin.py, joining the job's Ray cluster) fails with an NCCL error at
step 3; the nccl-error rule resumes from the newest checkpoint, which Shepherd does inside the same Slurm job:
the runner runs the driver again where ray.sub runs COMMAND, on the head node, with Ray still up (ray.sub
starts it once per job), and no second sbatch. NeMo RL's ray.sub runs `ray stop` at its end: those cases hold
the Ray lock exclusive (`ray_stop`), as tests/integration/test_nemo_rl_raysub.py does.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest

from tests.support.daemon import REPO, DaemonProcess

from .conftest import VENV_BIN, SlurmCluster

STANDIN = REPO / "tests" / "support" / "nemo_rl_standin.py"
SHARED = REPO.parent / "shared" / "third_party" / "nemo-rl"
FINAL = {"COMPLETED", "FAILED", "GAVE_UP", "CANCELLED"}


@pytest.fixture
def sup(tmp_path: Path, slurm_cluster: SlurmCluster) -> Any:
    if not (VENV_BIN / "ray").exists():
        pytest.skip("ray is not installed in .venv (scripts/setup)")
    d = DaemonProcess(tmp_path / "root", env=slurm_cluster.env)
    d.start()
    yield d
    d.stop()


def command(tmp: Path) -> str:
    argv = ["python", str(STANDIN), f"checkpointing.checkpoint_dir={tmp / 'results'}"]
    argv += ["checkpointing.save_period=2", "--ray", "--steps", "6", "--fail-at", "3", "--failure", "nccl"]
    return shlex.join([*argv, "--record", str(tmp / "record.jsonl")])


def spec(tmp: Path, launcher: list[str]) -> Path:
    (tmp / "results").mkdir(parents=True, exist_ok=True)
    lines = [
        "name: inplace",
        f"command: {json.dumps(command(tmp))}",
        f"workdir: {tmp}",
        f"checkpoint: {{dir: {tmp / 'results'}, metric: 'val:accuracy'}}",
        "resume: {backoff_s: 0, in_place: true, in_place_wait_s: 60,"
        " checkpoint_dir_arg: ['checkpointing.checkpoint_dir={checkpoint_dir}']}",
        *launcher,
    ]
    path = tmp / "inplace.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def nemo_launcher(tmp: Path, script: Path) -> list[str]:
    env = {"RAY_AUTH_MODE": "disabled"}
    if "CPUTot" not in script.read_text():  # v0.6.0 asks GPUS_PER_NODE*16 CPUs (later: the node's CPUTot)
        env["CPUS_PER_WORKER"] = "8"
    return [
        f"launcher: {{kind: nemo-rl, script: {script}}}",
        "slurm: {account: shepherd, partition: gpu, nodes: 1, gpus_per_node: 4, time: '00:15:00'}",
        f"container: {{image: nvcr.io/nvidia/nemo-rl:v0.6.0, mounts: ['{tmp}:{tmp}']}}",
        f"env: {json.dumps(env)}",
    ]


def assert_restarted_in_place(sup: DaemonProcess, run: str, tmp: Path) -> None:
    # A failsafe, not a bound the behaviour must meet: on the loaded 2-core CI machine ray.sub v0.6.0's head
    # once took 58 s to start, and the whole run 85 s was not enough (it takes ~65 s there when it does).
    final = sup.wait_state(run, FINAL, timeout=180)
    status = sup.status(run)
    assert final["state"] == "COMPLETED", status
    first, second = status["attempt_list"]
    assert first["job_id"] == second["job_id"]  # no second sbatch
    assert second["overrides"]["driver_run"] == 2
    [d] = [d for d in status["decisions"] if d["rule"] == "nccl-error"]
    assert "in place: driver run 2 of Slurm job" in d["outcome"], d
    one, two = [json.loads(line) for line in (tmp / "record.jsonl").read_text().splitlines()]
    assert one["job"] == two["job"] and one["job"] in (first["job_id"], None)  # main's ray.sub unsets SLURM_*
    assert one["ray"] and two["ray"] == one["ray"]  # the second run joined the same, still running, Ray
    assert two["resumed_from"] == 2  # the newest checkpoint before the crash at step 3


@pytest.mark.slurm
@pytest.mark.ray
def test_a_crash_restarts_in_place_under_our_ray_sub(sup: DaemonProcess, tmp_path: Path) -> None:
    run = sup.submit(spec(tmp_path, ["slurm: {cpus: 2, time: '00:10:00'}"]))
    assert_restarted_in_place(sup, run, tmp_path)


@pytest.mark.slurm
@pytest.mark.ray
@pytest.mark.ray_stop
@pytest.mark.parametrize("name", ["ray.sub.main-7ea279a", "ray.sub.v0.6.0"])
def test_a_crash_restarts_in_place_under_nemo_rls_own_ray_sub(
    sup: DaemonProcess, tmp_path: Path, name: str
) -> None:
    script = SHARED / name
    if not script.is_file():
        pytest.skip(f"no NeMo RL ray.sub at {script}")
    run = sup.submit(spec(tmp_path, nemo_launcher(tmp_path, script)))
    assert_restarted_in_place(sup, run, tmp_path)
