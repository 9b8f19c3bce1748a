"""What a spec needs from the filesystems and from Slurm, and what is wrong with the facts: pure functions.

The facts are gathered by `probe.py`; here they are judged, so each problem (field, reason, fix) is
unit-tested without touching a disk or Slurm. A problem is blocking (the spec is refused) unless it only says
that something could not be checked in time or Slurm could not be asked: those are warnings, because
preflight must never hold a submission up for long or refuse it for the cluster's own trouble.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from supervisor.domain.spec import JobSpec
from supervisor.slurm.parse import SlurmNode

CHECKS = ("paths", "shared", "model", "writable", "container", "sbatch", "gres")
Kind = Literal["dir", "file", "any"]
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf", ".ckpt")


@dataclass(frozen=True, slots=True)
class Problem:
    field: str
    reason: str
    fix: str
    blocking: bool = True

    def __str__(self) -> str:
        return f"{self.field}: {self.reason} (fix: {self.fix})"


@dataclass(frozen=True, slots=True)
class Need:
    """One path the job reads or writes, and what it must be."""

    field: str
    path: Path
    kind: Kind
    must_exist: bool = True  # else its nearest existing ancestor must be writable (the job creates it)
    writable: bool = False
    model: bool = False


@dataclass(frozen=True, slots=True)
class PathFacts:
    exists: bool
    is_dir: bool
    fs: str
    shared: bool
    readable: bool
    writable: bool | None = None  # None: not probed
    listing: tuple[str, ...] | None = None  # a model dir's entries
    error: str | None = None


def needs(spec: JobSpec) -> list[Need]:
    """Every path of `spec` that the job (on a compute node) will read or write."""
    out: list[Need] = []
    if spec.workdir is not None:
        out.append(Need("workdir", spec.workdir, "dir"))
    argv0 = spec.argv()[0]
    if argv0.startswith("/"):
        out.append(Need("command", Path(argv0), "file"))
    if spec.model_dir is not None:
        out.append(Need("model_dir", spec.model_dir, "dir", model=True))
    if spec.checkpoint is not None:
        out.append(Need("checkpoint.dir", spec.checkpoint.dir, "dir", must_exist=False, writable=True))
    if spec.log_dir is not None:
        out.append(Need("log_dir", spec.log_dir, "dir", must_exist=False, writable=True))
    if spec.trainer_log_dir is not None:
        out.append(Need("trainer_log_dir", spec.trainer_log_dir, "dir", must_exist=False, writable=True))
    if spec.shared_cache_dir is not None:
        out.append(Need("shared_cache_dir", spec.shared_cache_dir, "dir", must_exist=False, writable=True))
    if spec.container is not None:
        image = spec.container.image
        if image.startswith("/") or image.endswith((".sqsh", ".sif", ".squashfs")):
            out.append(Need("container.image", Path(image), "file"))
        for i, mount in enumerate(spec.container.mounts):
            src = mount.split(":", 1)[0]
            if src.startswith("/"):
                out.append(Need(f"container.mounts[{i}]", Path(src), "any"))
    return out


def _under(path: Path, roots: Sequence[Path]) -> bool:
    return any(path == r or r in path.parents for r in roots)


def is_local(need: Need, facts: PathFacts, shared_paths: Sequence[Path]) -> bool:
    """The path is on a disk of this machine only (and not declared shared): the nodes see it only if they
    are this machine."""
    return facts.error is None and not facts.shared and not _under(need.path, shared_paths)


@dataclass(frozen=True, slots=True)
class Here:
    """This machine, as the compute nodes' names and addresses are compared with it."""

    names: frozenset[str]  # its hostname (lower case), and its short form
    addresses: frozenset[str]  # addresses that are this machine's own


def _short(name: str) -> str:
    return name if _ip(name) is not None else name.split(".", 1)[0]


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def job_nodes(nodes: Sequence[SlurmNode], partition: str | None) -> list[SlurmNode]:
    """The nodes a job may run on: those of its partitions (`a,b`), or every node of the cluster when the
    spec names none (the default partition is not asked: such a job is here only if the whole cluster is)."""
    if partition is None:
        return list(nodes)
    wanted = set(partition.split(","))
    return [n for n in nodes if wanted & set(n.partitions)]


def node_is_here(node: SlurmNode, here: Here, resolved: frozenset[str]) -> bool:
    """Whether `node` is this machine: its slurmd runs under our hostname (NodeHostName), or its NodeAddr or
    NodeHostName is (or resolves to, `resolved`) a loopback address or one of ours."""
    names = {x.lower() for x in (node.hostname, node.addr)}
    if (names | {_short(x) for x in names}) & here.names:
        return True
    literal = {x for x in (node.addr, node.hostname) if _ip(x) is not None}
    for text in literal | resolved:
        ip = _ip(text.split("%", 1)[0])  # fe80::1%eth0: the scope says nothing about whose it is
        if ip is not None and (ip.is_loopback or str(ip) in here.addresses):
            return True
    return False


def nodes_are_here(nodes: Sequence[SlurmNode], here: Here, resolved: Mapping[str, frozenset[str]]) -> bool:
    """Whether every node is this machine (a single-machine cluster: the dev cluster, a workstation), so a
    path on a local disk is one the job sees; `resolved` maps a node's name to what its NodeAddr and
    NodeHostName resolve to here. No nodes: not known to be here."""
    return bool(nodes) and all(node_is_here(n, here, resolved.get(n.name, frozenset())) for n in nodes)


def judge_path(
    need: Need,
    facts: PathFacts,
    shared_paths: Sequence[Path],
    skip: frozenset[str],
    *,
    nodes_here: bool = False,
) -> list[Problem]:
    """The problems of one path, given what was found there; `nodes_here`: the job's nodes are this machine,
    so a local path is one they see."""
    f, p = need.field, need.path
    if f.startswith("container") and "container" in skip:
        return []
    if facts.error is not None:
        return [Problem(f, f"{p} could not be checked: {facts.error}", "check the path and its filesystem")]
    out: list[Problem] = []
    if need.must_exist and "paths" not in skip:
        if not facts.exists:
            return [Problem(f, f"{p} does not exist", "create it or correct the path in the spec")]
        if need.kind == "dir" and not facts.is_dir:
            return [Problem(f, f"{p} is not a directory", "point it at a directory")]
        if need.kind == "file" and facts.is_dir:
            return [Problem(f, f"{p} is a directory, not a file", "point it at the file")]
        if not facts.readable:
            return [Problem(f, f"{p} is not readable by you", f"chmod u+r {p}, or use a copy you can read")]
    if "shared" not in skip and not nodes_here and is_local(need, facts, shared_paths):
        out.append(
            Problem(
                f,
                f"{p} is on {facts.fs}, local to this login node: the compute nodes cannot see it",
                "move it to a filesystem the nodes share (your home, /lustre, /gpfs ...); if they do share "
                "it, add it to preflight.shared_paths in shepherd.toml",
            )
        )
    if need.writable and facts.writable is False and "writable" not in skip:
        where = p if facts.exists else "its nearest existing parent"
        out.append(
            Problem(f, f"cannot create files in {where}", f"make {where} writable, or choose another dir")
        )
    if need.model and facts.exists and facts.listing is not None and "model" not in skip:
        out += judge_model_dir(f, p, facts.listing)
    return out


def judge_model_dir(field: str, path: Path, listing: Sequence[str]) -> list[Problem]:
    """A Hugging Face style model dir: a config.json and at least one weights file (or a weights index)."""
    names = set(listing)
    out = []
    if "config.json" not in names:
        out.append(
            Problem(field, f"{path} has no config.json", "point model_dir at the folder with config.json")
        )
    weights = [n for n in names if n.endswith(WEIGHT_SUFFIXES) or n.endswith(".index.json")]
    if not weights:
        out.append(
            Problem(
                field,
                f"{path} has no weights (*.safetensors, *.bin, *.pt)",
                "finish the download (huggingface-cli download ...) or point at the folder with the weights",
            )
        )
    return out


# A node in any other state (UNKNOWN after a controller restart, DOWN, DRAIN, NOT_RESPONDING `*`, powered
# down...) is not up now, though a job that asks for it is valid and pends until it is back.
_UP_WORDS = frozenset({"IDLE", "MIXED", "ALLOCATED", "ALLOC", "MIX", "COMPLETING", "PLANNED"})


def nodes_not_up(nodes: Sequence[SlurmNode]) -> list[SlurmNode]:
    """The nodes Slurm cannot place a job on now (their state says so)."""
    return [n for n in nodes if "*" in n.state or not set(n.state.split("+")) <= _UP_WORDS]


def judge_sbatch(error: str, not_up: Sequence[SlurmNode] = ()) -> Problem:
    """`sbatch --test-only` refused the request: name the spec field its message is about. `Requested node
    configuration is not available` while some of the job's nodes are not up (`not_up`) is only a warning:
    --test-only says it for any node that is down, drained or not yet registered, where sbatch itself queues
    the job to wait for them."""
    low = error.lower()
    if "node configuration is not available" in low and not_up:
        states = ", ".join(f"{n.name} {n.state}" for n in not_up[:5]) + (", ..." if len(not_up) > 5 else "")
        return Problem(
            "slurm",
            f"sbatch --test-only refused the job ({error}) while nodes are not up ({states}): it may fit "
            "once they are back",
            "if it stays pending, compare the request with the nodes (`sinfo -N -l`)",
            blocking=False,
        )
    field, fix = "slurm", "change the spec's slurm section so that sbatch accepts it"
    for words, f, hint in (
        (("account", "association"), "slurm.account", "use an account from `sacctmgr show assoc user=$USER`"),
        (("qos",), "slurm.qos", "use a QOS your account may use (`sacctmgr show assoc`)"),
        (("partition",), "slurm.partition", "use a partition from `sinfo -s`"),
        (("time limit",), "slurm.time", "ask for less time than the partition's limit (`sinfo -o '%P %l'`)"),
        (("gres", "node configuration", "gpu"), "slurm.gpus_per_node", "ask for GPUs the nodes have"),
        (("memory", "mem"), "slurm.mem", "ask for less memory per node"),
    ):
        if any(w in low for w in words):
            field, fix = f, hint
            break
    return Problem(field, f"sbatch --test-only refused the job: {error}", fix)


def raysub_gpu_count(gres: str) -> str:
    """The GPU count NeMo RL's ray.sub reads from a node's GRES (`maybe_gres_arg`: `cut -d'(' -f1 | awk -F:
    '{print $NF}'`): the last `:` field before any `(`, as text (`gpu:h100:8(S:0-1)` -> `8`)."""
    return gres.split("(", 1)[0].rsplit(":", 1)[-1].strip()


def judge_gres(gpus_per_node: int, nodes: Sequence[SlurmNode]) -> Problem | None:
    """NeMo RL's ray.sub exits 1 before Ray starts when its partition advertises a `gpu:` GRES whose count is
    not `GPUS_PER_NODE` (`Error: GPUS_PER_NODE=4 but GRES detected is gpu:8 ...`): refuse that spec before it
    is queued. `nodes` are the job's partition's; its GPUS_PER_NODE is what shepherd exports for the spec. A
    partition whose nodes advertise different counts is only a warning (ray.sub's own test then cannot
    compare, and lets the job go on). v0.6.0 does not cut a socket spec off (`gpu:8(S:0-1)`) and then cannot
    compare either; the count still disagrees with the nodes, so the spec is refused all the same."""
    gres = sorted({n.gres for n in nodes if "gpu:" in n.gres})
    counts = sorted({raysub_gpu_count(g) for g in gres})
    if not counts:
        return None  # no gpu GRES: ray.sub runs without --gres
    shown = ", ".join(gres[:4]) + (", ..." if len(gres) > 4 else "")
    if len(counts) > 1:
        return Problem(
            "slurm.gpus_per_node",
            f"the partition's nodes advertise different GPU GRES ({shown}): NeMo RL's ray.sub cannot check "
            f"GPUS_PER_NODE={gpus_per_node} against them",
            "make sure the nodes the job gets have that many GPUs (or pick a partition of one kind)",
            blocking=False,
        )
    if counts[0] == str(gpus_per_node):
        return None
    return Problem(
        "slurm.gpus_per_node",
        f"NeMo RL's ray.sub exits 1 at start when GPUS_PER_NODE ({gpus_per_node}) differs from the "
        f"partition's GRES ({shown}): it claims whole nodes",
        f"set slurm.gpus_per_node: {counts[0]}",
    )


def warning(field: str, reason: str) -> Problem:
    return Problem(field, reason, "nothing to do now; use --no-preflight to skip the checks", blocking=False)
