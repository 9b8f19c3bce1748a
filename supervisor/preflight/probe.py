"""Gather the facts preflight judges, never for longer than its time bound, and judge them.

A stat on a hung NFS mount can block for minutes in uninterruptible sleep, so the paths are probed in a worker
thread that is abandoned (not waited for) when the bound passes; what was not probed in time becomes a
warning. `sbatch --test-only` is one real Slurm call through the client, with what is left of the bound as its
timeout. Where a path is on a local disk, Slurm is asked where the job's nodes are: a cluster whose nodes are
this machine (the dev cluster, a workstation) sees every local path.
"""

from __future__ import annotations

import os
import secrets
import socket
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import anyio
import anyio.to_thread

from supervisor.domain.overrides import AttemptOverrides
from supervisor.domain.spec import JobSpec
from supervisor.preflight.checks import (
    Here,
    Need,
    PathFacts,
    Problem,
    is_local,
    job_nodes,
    judge_gres,
    judge_path,
    judge_sbatch,
    needs,
    node_is_here,
    nodes_are_here,
    nodes_not_up,
    warning,
)
from supervisor.slurm.client import SlurmClient, SlurmError, SlurmRejected, SlurmUnavailable
from supervisor.slurm.parse import SlurmNode
from supervisor.slurm.submit import build_submit_request
from supervisor.watch.fswatch import detect_fs, existing_ancestor


class NodeSource(Protocol):
    """Where preflight learns the cluster's nodes: the Slurm client (`scontrol -o show node`), or
    MemoryNodes in tests. Raises SlurmError when Slurm cannot tell."""

    async def nodes(self) -> list[SlurmNode]: ...


class MemoryNodes:
    """A NodeSource for tests and one-shot tools: these nodes, or this error; counts the questions."""

    def __init__(self, nodes: Sequence[SlurmNode] = (), *, error: SlurmError | None = None) -> None:
        self._nodes = list(nodes)
        self.error = error
        self.asked = 0

    async def nodes(self) -> list[SlurmNode]:
        self.asked += 1
        if self.error is not None:
            raise self.error
        return list(self._nodes)


def probe(need: Need) -> PathFacts:
    """What is at `need.path` (stat, access, a real create for writability, a model dir's listing)."""
    p = need.path
    try:
        exists = p.exists()
        is_dir = p.is_dir()
        fs = detect_fs(p)
        readable = os.access(p, os.R_OK) if exists else False
        writable = _can_create(p if exists and is_dir else existing_ancestor(p)) if need.writable else None
        listing = tuple(sorted(os.listdir(p))) if need.model and is_dir else None
    except OSError as exc:
        return PathFacts(False, False, "unknown", False, False, error=str(exc))
    return PathFacts(exists, is_dir, fs.name, fs.shared, readable, writable, listing)


def _can_create(folder: Path) -> bool:
    """A real create and unlink: `access(W_OK)` is wrong on NFS with root squash or ACLs."""
    test = folder / f".shepherd-preflight-{secrets.token_hex(4)}"
    try:
        test.touch(exist_ok=False)
    except OSError:
        return False
    try:
        test.unlink()
    except OSError:
        pass
    return True


def _resolve(name: str) -> frozenset[str]:
    try:
        return frozenset(str(ai[4][0]) for ai in socket.getaddrinfo(name, None))
    except (OSError, UnicodeError):
        return frozenset()


def _binding_tells() -> bool:
    """Whether binding to an address proves it is ours: not where the kernel lets anyone bind any address."""
    for family in ("ipv4", "ipv6"):
        try:
            if Path(f"/proc/sys/net/{family}/ip_nonlocal_bind").read_text().strip() != "0":
                return False
        except OSError:
            continue
    return True


def _bindable(address: str) -> bool:
    """A local call (no packet leaves): only an address of this machine can be bound."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as sock:
            sock.bind((address, 0))
    except (OSError, ValueError):
        return False
    return True


def this_host() -> Here:
    """This machine's hostname (and short form) and the addresses it resolves to."""
    host = socket.gethostname().lower()
    return Here(frozenset({host, host.split(".", 1)[0]}), _resolve(host))


def locate(nodes: Sequence[SlurmNode]) -> tuple[Here, dict[str, frozenset[str]]]:
    """This machine, and what each node's NodeAddr and NodeHostName resolve to here; an address a node
    resolves to that this machine can bind is one of ours. Resolved in order until the first node that is
    not this machine: the others cannot change the answer, and a big cluster's names are not all looked up."""
    here = this_host()
    binding = _binding_tells()
    resolved: dict[str, frozenset[str]] = {}
    for node in nodes:
        if node_is_here(node, here, frozenset()):  # by name or a literal address: nothing to look up
            continue
        addrs = _resolve(node.addr) | _resolve(node.hostname)
        ours = frozenset(a for a in addrs if binding and a not in here.addresses and _bindable(a))
        here = Here(here.names, here.addresses | ours)
        resolved[node.name] = addrs
        if not node_is_here(node, here, addrs):
            break
    return here, resolved


async def _nodes_here(spec: JobSpec, source: NodeSource, deadline: float) -> tuple[bool, Problem | None]:
    """Whether the nodes the job may run on are all this machine; a warning when Slurm could not say."""
    left = deadline - time.monotonic()
    if left < 0.5:
        return False, warning("slurm", "Slurm not asked where the nodes are: the time for preflight ran out")
    with anyio.move_on_after(left):
        try:
            nodes = job_nodes(await source.nodes(), spec.slurm.partition)
        except SlurmError as exc:
            return False, warning("slurm", f"Slurm could not say where the nodes are: {exc}")
        here, resolved = await anyio.to_thread.run_sync(locate, nodes, abandon_on_cancel=True)
        return nodes_are_here(nodes, here, resolved), None
    return False, warning("slurm", f"where the nodes are not known within {left:.0f} s")


async def run_preflight(
    spec: JobSpec,
    *,
    slurm: SlurmClient | None,
    timeout_s: float,
    shared_paths: Sequence[Path] = (),
    run_dir: Path | None = None,
    skip: Sequence[str] = (),
    nodes: NodeSource | None = None,
) -> list[Problem]:
    """Every problem found within `timeout_s`; `slurm` None (or "sbatch" skipped) asks Slurm nothing;
    `nodes` None: a path on a local disk is refused without asking where the nodes are."""
    skipped = frozenset([*skip, *spec.preflight.skip])
    if "all" in skipped:
        return []
    deadline = time.monotonic() + timeout_s
    wanted = needs(spec)
    found: dict[int, PathFacts] = {}

    def probe_all() -> None:
        for i, need in enumerate(wanted):
            if time.monotonic() > deadline:
                return
            found[i] = probe(need)

    problems: list[Problem] = []
    with anyio.move_on_after(timeout_s):
        await anyio.to_thread.run_sync(probe_all, abandon_on_cancel=True)
    here, note = False, None
    local = any(is_local(need, found[i], shared_paths) for i, need in enumerate(wanted) if i in found)
    if local and nodes is not None and "shared" not in skipped:
        here, note = await _nodes_here(spec, nodes, deadline)
    for i, need in enumerate(wanted):
        facts = found.get(i)
        if facts is None:
            problems.append(warning(need.field, f"{need.path} not checked: no answer within {timeout_s:g} s"))
        else:
            problems += judge_path(need, facts, shared_paths, skipped, nodes_here=here)
    if note is not None:
        problems.append(note)
    if spec.launcher.kind == "nemo-rl" and nodes is not None and "gres" not in skipped:
        problems += await _gres(spec, nodes, deadline)
    if slurm is not None and "sbatch" not in skipped:
        problems += await _test_only(spec, slurm, deadline, run_dir, nodes)
    return problems


async def _gres(spec: JobSpec, source: NodeSource, deadline: float) -> list[Problem]:
    """NeMo RL's ray.sub refuses a GPUS_PER_NODE that is not its partition's GPU GRES: ask Slurm for the
    partition's nodes (`scontrol -o show node`, their `Gres=`) and judge it here, before the job queues."""
    with anyio.move_on_after(max(0.0, deadline - time.monotonic())):
        try:
            nodes = job_nodes(await source.nodes(), spec.slurm.partition)
        except SlurmError as exc:
            return [warning("slurm.gpus_per_node", f"Slurm could not say the nodes' GRES: {exc}")]
        problem = judge_gres(spec.slurm.gpus_per_node, nodes)
        return [problem] if problem is not None else []
    return [warning("slurm.gpus_per_node", "the nodes' GRES not known: the time for preflight ran out")]


async def _not_up(spec: JobSpec, source: NodeSource | None, deadline: float) -> list[SlurmNode]:
    """The job's nodes that are not up now; none when Slurm cannot say in the time left."""
    if source is None:
        return []
    with anyio.move_on_after(max(0.0, deadline - time.monotonic())):
        try:
            return nodes_not_up(job_nodes(await source.nodes(), spec.slurm.partition))
        except SlurmError:
            return []
    return []


async def _test_only(
    spec: JobSpec, slurm: SlurmClient, deadline: float, run_dir: Path | None, nodes: NodeSource | None
) -> list[Problem]:
    left = deadline - time.monotonic()
    if left < 0.5:
        return [warning("slurm", "sbatch --test-only not asked: the time for preflight ran out")]
    req = build_submit_request(
        spec,
        run_id="preflight",
        attempt=1,
        run_dir=run_dir or Path("/tmp"),
        overrides=AttemptOverrides(),
        environ=os.environ,  # the base only: --test-only starts no job, and reads no secret
    )
    if spec.workdir is not None and not spec.workdir.is_dir():
        return []  # the missing workdir is reported already; sbatch would only repeat it
    saved = slurm.timeout_s
    slurm.timeout_s = min(saved, left)
    try:
        await slurm.test_only(req)
    except SlurmRejected as exc:
        error = str(exc).split(": ", 1)[-1]
        down = await _not_up(spec, nodes, deadline) if "node configuration" in error.lower() else []
        return [judge_sbatch(error, down)]
    except SlurmUnavailable as exc:
        return [warning("slurm", f"sbatch --test-only could not ask Slurm: {exc}")]
    finally:
        slurm.timeout_s = saved
    return []
