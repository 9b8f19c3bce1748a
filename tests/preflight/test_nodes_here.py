"""Whether the nodes a job may run on are this machine, judged on `scontrol -o show node` as Slurm printed it:
the dev cluster (recorded) sees every local path, a cluster of other machines (modelled on real output) does
not, and preflight refuses a local path only there."""

from __future__ import annotations

import socket
from pathlib import Path

import anyio
import pytest

from supervisor.domain.spec import JobSpec
from supervisor.preflight.checks import Here, job_nodes, judge_sbatch, nodes_are_here, nodes_not_up
from supervisor.preflight.probe import MemoryNodes, locate, run_preflight
from supervisor.slurm.client import SlurmClient, SlurmRejected, SlurmUnavailable, SubmitRequest
from supervisor.slurm.parse import SlurmNode, parse_scontrol_nodes

DATA = Path(__file__).resolve().parents[1] / "data" / "slurm"
# Recorded on the dev cluster (scripts/record-slurm-outputs; `up --nodes 2` for the second).
DEV = parse_scontrol_nodes((DATA / "22.05" / "scontrol_show_node.txt").read_text())
DEV_2 = parse_scontrol_nodes((DATA / "22.05" / "scontrol_show_node_2nodes.txt").read_text())
# The same node just after a controller restart (UNKNOWN until its slurmd registers), and taken down.
RESTARTED = parse_scontrol_nodes((DATA / "22.05" / "scontrol_show_node_ctld_restarted.txt").read_text())
DOWN = parse_scontrol_nodes((DATA / "22.05" / "scontrol_show_node_down.txt").read_text())
# Four GPU nodes and two CPU nodes, each its own machine; the login node is not one of them.
CLUSTER = parse_scontrol_nodes((DATA / "scontrol_show_node_cluster.txt").read_text())

LOGIN = Here(names=frozenset({"login01"}), addresses=frozenset({"10.12.0.2", "127.0.1.1"}))


VERSIONS = sorted(p.parent.name for p in DATA.glob("*/scontrol_show_node.txt"))


@pytest.mark.parametrize("version", VERSIONS)
def test_the_dev_clusters_node_is_reached_on_loopback_whatever_this_hosts_name(version: str) -> None:
    def read(name: str) -> list[SlurmNode]:
        return parse_scontrol_nodes((DATA / version / f"scontrol_show_node{name}.txt").read_text())

    [node] = read("")
    assert (node.addr, node.partitions, node.state) == ("127.0.0.1", ("debug", "small", "gpu"), "IDLE")
    assert nodes_are_here([node], LOGIN, {})
    # After a controller restart (UNKNOWN), and taken down: the same node, not up.
    for name in ("_ctld_restarted", "_down"):
        [later] = read(name)
        assert later.name == node.name and nodes_not_up([later]) == [later], later.state


def test_two_nodes_whose_slurmd_runs_under_this_hosts_name_are_here() -> None:
    """`--nodes 2`: node2's address lives in a network namespace, but both slurmd run on the recording host
    (`hostname -s`)."""
    node1, node2 = DEV_2
    host = node1.hostname
    assert node2.hostname == host and node1.addr.startswith("10.233.") and node2.addr.startswith("10.233.")
    assert nodes_are_here(DEV_2, Here(frozenset({host}), frozenset()), {})
    assert nodes_are_here(DEV_2, Here(frozenset({f"{host}.example.org", host}), frozenset()), {})
    assert not nodes_are_here(DEV_2, LOGIN, {})
    # Known by address alone: both addresses are this machine's.
    assert nodes_are_here(DEV_2, Here(frozenset({"other"}), frozenset({node1.addr, node2.addr})), {})
    # One of two is not enough.
    assert not nodes_are_here(DEV_2, Here(frozenset({"other"}), frozenset({node1.addr})), {})


def test_a_cluster_of_other_machines_is_not_here() -> None:
    names = [n.name for n in CLUSTER]
    assert names == ["gpu-a001", "gpu-a002", "gpu-a003", "gpu-a004", "cpu001", "cpu002"]
    drained = CLUSTER[2]  # its Reason has spaces and brackets, after the fields read
    assert (drained.addr, drained.hostname, drained.partitions) == ("10.12.0.13", "gpu-a003", ("gpu", "all"))
    assert CLUSTER[4].addr == "cpu001.hpc.example.org"
    resolved = {"cpu001": frozenset({"10.12.1.1"}), "cpu002": frozenset({"10.12.1.2"})}
    for partition in (None, "gpu", "cpu", "gpu,cpu"):
        assert not nodes_are_here(job_nodes(CLUSTER, partition), LOGIN, resolved), partition


def test_a_node_whose_name_resolves_to_one_of_our_addresses_or_to_loopback_is_here() -> None:
    workstation = [SlurmNode("ws", "ws.lan", "ws.lan", ("debug",))]
    here = Here(frozenset({"desk"}), frozenset({"192.168.1.5"}))
    assert nodes_are_here(workstation, here, {"ws": frozenset({"192.168.1.5"})})
    assert nodes_are_here(workstation, here, {"ws": frozenset({"127.0.1.1"})})
    assert nodes_are_here(workstation, here, {"ws": frozenset({"::1"})})
    assert not nodes_are_here(workstation, here, {"ws": frozenset({"192.168.1.6"})})
    assert not nodes_are_here(workstation, here, {})  # it resolves to nothing here


def test_only_the_partitions_the_job_may_use_count() -> None:
    """A login node that is itself the node of an `interactive` partition: a job there sees its disks."""
    login_node = SlurmNode("login01", "10.12.0.2", "login01", ("interactive",))
    nodes = [*CLUSTER, login_node]
    assert job_nodes(nodes, "interactive") == [login_node]
    assert nodes_are_here(job_nodes(nodes, "interactive"), LOGIN, {})
    assert not nodes_are_here(job_nodes(nodes, "interactive,gpu"), LOGIN, {})
    assert not nodes_are_here(job_nodes(nodes, None), LOGIN, {})  # the default partition is not asked
    assert job_nodes(nodes, "nosuch") == []
    assert not nodes_are_here([], LOGIN, {})  # no node known: not here


def test_this_machine_is_found_by_its_hostname_and_by_loopback() -> None:
    """The lookups on this very machine: its own hostname, loopback; an address it does not have is not it."""
    ours = [
        SlurmNode("a", "127.0.0.1", "elsewhere.invalid", ("p",)),
        SlurmNode("b", "b.invalid", socket.gethostname(), ("p",)),
        SlurmNode("c", "localhost", "c.invalid", ("p",)),
    ]
    assert nodes_are_here(ours, *locate(ours))
    theirs = [*ours, SlurmNode("d", "203.0.113.77", "d.invalid", ("p",))]  # TEST-NET-3: no one's address
    assert not nodes_are_here(theirs, *locate(theirs))


def _spec(tmp: Path, **extra: object) -> JobSpec:
    return JobSpec.model_validate(
        {
            "name": "t",
            "command": ["python", "train.py"],
            "workdir": str(tmp),
            "checkpoint": {"dir": str(tmp / "ck")},
            **extra,
        }
    )


def _preflight(spec: JobSpec, nodes: MemoryNodes) -> list[str]:
    return [str(p) for p in anyio.run(lambda: run_preflight(spec, slurm=None, nodes=nodes, timeout_s=10))]


def _local(tmp: Path) -> None:
    problems = anyio.run(lambda: run_preflight(_spec(tmp), slurm=None, timeout_s=10))
    if not any("local to this login node" in p.reason for p in problems):
        pytest.skip(f"{tmp} is on a shared filesystem here")


def test_preflight_accepts_local_paths_when_the_nodes_are_this_machine(tmp_path: Path) -> None:
    _local(tmp_path)
    nodes = MemoryNodes(DEV)
    assert _preflight(_spec(tmp_path), nodes) == []
    assert nodes.asked == 1


def test_preflight_refuses_local_paths_when_the_nodes_are_other_machines(tmp_path: Path) -> None:
    _local(tmp_path)
    problems = _preflight(_spec(tmp_path, slurm={"partition": "gpu"}), MemoryNodes(CLUSTER))
    assert [p.split(":")[0] for p in problems] == ["workdir", "checkpoint.dir"]
    assert all("local to this login node" in p for p in problems)
    # The dev cluster's node, but the job asks for a partition it is not in: no node is known to be here.
    assert len(_preflight(_spec(tmp_path, slurm={"partition": "gpu-big"}), MemoryNodes(DEV))) == 2


def test_a_slurm_that_cannot_say_where_the_nodes_are_leaves_the_refusal_and_says_why(tmp_path: Path) -> None:
    _local(tmp_path)
    down = MemoryNodes(error=SlurmUnavailable("scontrol exited 1: Unable to contact slurm controller"))
    problems = anyio.run(lambda: run_preflight(_spec(tmp_path), slurm=None, nodes=down, timeout_s=10))
    assert [(p.field, p.blocking) for p in problems] == [
        ("workdir", True),
        ("checkpoint.dir", True),
        ("slurm", False),
    ]
    assert "Slurm could not say where the nodes are" in problems[-1].reason
    assert "Unable to contact slurm controller" in problems[-1].reason


def test_slurm_is_not_asked_when_every_path_is_declared_shared(tmp_path: Path) -> None:
    nodes = MemoryNodes(CLUSTER)
    problems = anyio.run(
        lambda: run_preflight(_spec(tmp_path), slurm=None, nodes=nodes, timeout_s=10, shared_paths=[tmp_path])
    )
    assert problems == [] and nodes.asked == 0


# What the dev cluster's `sbatch --test-only` said (rc 1) while its node was UNKNOWN after `ctld-stop --kill`,
# and again while it was drained and down; sbatch itself queued the same job each time.
NO_NODE_FITS = "allocation failure: Requested node configuration is not available"


def test_node_states_as_recorded() -> None:
    assert {"22.05", "24.11"} <= set(VERSIONS)
    assert [n.state for n in DEV + RESTARTED] == ["IDLE", "UNKNOWN"] and DOWN[0].state.startswith("DOWN")
    assert [n.state for n in CLUSTER] == ["MIXED", "IDLE", "IDLE+DRAIN", "IDLE", "IDLE", "IDLE"]
    assert nodes_not_up(DEV) == [] and nodes_not_up(RESTARTED) == RESTARTED and nodes_not_up(DOWN) == DOWN
    assert [n.name for n in nodes_not_up(CLUSTER)] == ["gpu-a003"]
    assert nodes_not_up([SlurmNode("n", "n", "n", (), "IDLE*")])  # not responding


def test_no_node_fits_is_a_warning_while_the_nodes_are_not_up() -> None:
    """--test-only refuses for a node not registered yet after a controller restart, or down, or drained."""
    refused = judge_sbatch(NO_NODE_FITS)
    assert refused.blocking and refused.field == "slurm.gpus_per_node"
    for nodes in (RESTARTED, DOWN):
        p = judge_sbatch(NO_NODE_FITS, nodes_not_up(nodes))
        assert not p.blocking and f"node1 {nodes[0].state}" in p.reason and NO_NODE_FITS in p.reason
    # Another refusal stays one, whatever the nodes' states.
    assert judge_sbatch("Invalid partition name specified", nodes_not_up(DOWN)).blocking


class RefusingSlurm(SlurmClient):
    """sbatch --test-only answering like the dev cluster's just after its controller restarted."""

    async def test_only(self, req: SubmitRequest) -> str:
        raise SlurmRejected(f"sbatch exited 1: {NO_NODE_FITS}")


def test_preflight_asks_the_nodes_state_before_refusing_for_no_node_that_fits(tmp_path: Path) -> None:
    spec = _spec(tmp_path, slurm={"partition": "debug"})

    def run(nodes: MemoryNodes) -> list[tuple[str, bool]]:
        problems = anyio.run(
            lambda: run_preflight(
                spec, slurm=RefusingSlurm(), nodes=nodes, timeout_s=10, shared_paths=[tmp_path]
            )
        )
        return [(p.field, p.blocking) for p in problems]

    assert run(MemoryNodes(RESTARTED)) == [("slurm", False)]
    assert run(MemoryNodes(DEV)) == [("slurm.gpus_per_node", True)]  # every node up: the request cannot fit
    assert run(MemoryNodes(error=SlurmUnavailable("timed out"))) == [("slurm.gpus_per_node", True)]
