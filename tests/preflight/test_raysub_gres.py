"""NeMo RL's ray.sub exits 1 when GPUS_PER_NODE is not its partition's GPU GRES count: preflight reads the
nodes' `Gres=` (the `scontrol -o show node` it asks already, as recorded) and refuses such a spec before it
is queued, with the count to set."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from supervisor.domain.spec import JobSpec
from supervisor.preflight.checks import judge_gres, raysub_gpu_count
from supervisor.preflight.probe import MemoryNodes, run_preflight
from supervisor.slurm.client import SlurmUnavailable
from supervisor.slurm.parse import SlurmNode, parse_scontrol_nodes

DATA = Path(__file__).resolve().parents[1] / "data" / "slurm"
DEV = parse_scontrol_nodes((DATA / "22.05" / "scontrol_show_node.txt").read_text())  # Gres=gpu:4
CLUSTER = parse_scontrol_nodes((DATA / "scontrol_show_node_cluster.txt").read_text())  # gpu:h100:8(S:0-1)
VERSIONS = sorted(p.parent.name for p in DATA.glob("*/scontrol_show_node.txt"))


def in_partition(nodes: list[SlurmNode], partition: str) -> list[SlurmNode]:
    return [n for n in nodes if partition in n.partitions]


@pytest.mark.parametrize("version", VERSIONS)
def test_the_recorded_nodes_gres_is_what_ray_sub_reads_from_sinfo(version: str) -> None:
    [node] = parse_scontrol_nodes((DATA / version / "scontrol_show_node.txt").read_text())
    assert node.gres == "gpu:4"
    assert (DATA / "22.05" / "sinfo_gres_gpu.txt").read_text().split() == [node.gres]  # `sinfo -o %G`


def test_ray_subs_count_is_the_last_field_before_the_socket_spec() -> None:
    assert raysub_gpu_count("gpu:4") == "4"
    assert raysub_gpu_count("gpu:h100:8(S:0-1)") == "8"


def test_a_gpus_per_node_that_is_not_the_partitions_gres_is_refused_with_the_count_to_set() -> None:
    p = judge_gres(8, in_partition(DEV, "gpu"))
    assert p is not None and p.blocking and p.field == "slurm.gpus_per_node"
    assert "GPUS_PER_NODE (8)" in p.reason and "gpu:4" in p.reason and p.fix == "set slurm.gpus_per_node: 4"
    assert judge_gres(4, in_partition(DEV, "gpu")) is None
    unset = judge_gres(0, in_partition(DEV, "gpu"))  # the spec's default: ray.sub would get GPUS_PER_NODE=0
    assert unset is not None and unset.blocking


def test_a_socket_spec_in_the_gres_and_nodes_without_gpus() -> None:
    assert judge_gres(8, in_partition(CLUSTER, "gpu")) is None
    p = judge_gres(4, in_partition(CLUSTER, "gpu"))
    assert p is not None and "gpu:h100:8(S:0-1)" in p.reason and p.fix.endswith(": 8")
    assert judge_gres(4, in_partition(CLUSTER, "cpu")) is None  # no gpu GRES: ray.sub runs without --gres


def test_a_partition_of_mixed_gpu_counts_is_only_a_warning() -> None:
    mixed = [
        SlurmNode("a", "a", "a", ("p",), "IDLE", "gpu:8"),
        SlurmNode("b", "b", "b", ("p",), "IDLE", "gpu:4"),
    ]
    p = judge_gres(8, mixed)
    assert p is not None and not p.blocking and "gpu:4, gpu:8" in p.reason


def nemo_spec(tmp: Path, gpus: int, **launcher: object) -> JobSpec:
    script = tmp / "ray.sub"
    script.write_text("#!/bin/bash\n")
    return JobSpec.model_validate(
        {
            "name": "t",
            "command": "uv run ./examples/run_grpo.py",
            "workdir": str(tmp),
            "launcher": {"kind": "nemo-rl", "script": str(script), **launcher},
            "container": {"image": "nvcr.io/nvidia/nemo-rl:v0.6.0", "mounts": [f"{tmp}:{tmp}"]},
            "slurm": {"account": "a", "partition": "gpu", "gpus_per_node": gpus},
        }
    )


def gres_problems(spec: JobSpec, nodes: MemoryNodes) -> list[tuple[str, bool]]:
    problems = anyio.run(lambda: run_preflight(spec, slurm=None, nodes=nodes, timeout_s=10))
    return [(p.reason, p.blocking) for p in problems if p.field == "slurm.gpus_per_node"]


def test_preflight_refuses_a_nemo_rl_spec_whose_gpus_per_node_ray_sub_would_refuse(tmp_path: Path) -> None:
    [(reason, blocking)] = gres_problems(nemo_spec(tmp_path, 8), MemoryNodes(DEV))
    assert blocking and "ray.sub exits 1" in reason
    assert gres_problems(nemo_spec(tmp_path, 4), MemoryNodes(DEV)) == []


def test_the_check_can_be_skipped_and_concerns_only_nemo_rls_launcher(tmp_path: Path) -> None:
    skipped = JobSpec.model_validate(
        {**nemo_spec(tmp_path, 8).model_dump(mode="json"), "preflight": {"skip": ["gres"]}}
    )
    assert gres_problems(skipped, MemoryNodes(DEV)) == []
    ours = JobSpec.model_validate(
        {"name": "t", "command": ["python", "x.py"], "workdir": str(tmp_path), "slurm": {"gpus_per_node": 8}}
    )
    assert gres_problems(ours, MemoryNodes(DEV)) == []


def test_a_slurm_that_cannot_say_is_a_warning(tmp_path: Path) -> None:
    down = MemoryNodes(error=SlurmUnavailable("scontrol exited 1: Unable to contact slurm controller"))
    [(reason, blocking)] = gres_problems(nemo_spec(tmp_path, 8), down)
    assert not blocking and "Unable to contact" in reason
