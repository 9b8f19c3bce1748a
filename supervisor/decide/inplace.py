"""Whether a resume the policy allowed runs again inside the job that failed (its runner waiting for
Shepherd's word) or goes back through Slurm: a pure function, so the daemon and bench/goodput.py decide alike.

Keeping the allocation saves the queue, Ray's start-up and the job's set-up at every failure; it is possible
only while the job runs, its driver runs under the runner, and the fix changes nothing Slurm gave the job
(docs/policy.md, "Restart in place")."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from supervisor.decide.plan import Resume

# After a failed driver run, how long the rules may read its last lines before the runner gets its word (an
# unrecognised failure's resume-once, or `end`).
RUNNER_SETTLE_S = 10.0


@dataclass(frozen=True)
class Spare:
    """What a node fault means for a job with spare nodes: the arguments `in_place_refusal` takes, and the
    worker node to drain out of the job's Ray cluster before its driver runs again (None: none)."""

    spare_left: bool
    head_node: bool
    host_up: bool
    drain: str | None


def spare_for(
    fault_node: str | None,
    *,
    head_node: str | None,
    host_up: bool,
    spare_nodes: int,
    drained: Collection[str] = (),
) -> Spare:
    """Whether a fault pinned to `fault_node` can be taken by one of the job's `spare_nodes`.

    Only a worker node whose host still runs is drained (Ray's drain, never `ray stop`: the other nodes' Ray
    processes, the head's GCS among them, keep running); the head node runs the driver and the GCS, and a host
    that is down cannot be drained: both go back through Slurm with `--exclude`. `drained` are the nodes this
    job's earlier driver runs drained already: each used one spare (a fault on a drained node again finds
    it counted). A `head_node` not known yet (Slurm's node list not read) may be this one: never drained."""
    if fault_node is None:
        return Spare(spare_left=False, head_node=False, host_up=host_up, drain=None)
    on_head = head_node is None or fault_node == head_node  # (not known yet: it may be)
    left = spare_nodes - len(set(drained)) >= 1
    ok = left and host_up and not on_head
    return Spare(spare_left=left, head_node=on_head, host_up=host_up, drain=fault_node if ok else None)


def in_place_refusal(
    resume: Resume,
    *,
    job_running: bool,
    runner: bool = True,
    planned: bool = False,
    container: bool = True,
    spare_left: bool = False,
    head_node: bool = False,
    host_up: bool = True,
    delay_s: float = 0.0,
    wait_s: float | None = None,
) -> str | None:
    """Why the resume cannot restart in place, or None when it can.

    - `job_running`: Slurm says the job runs (a NODE_FAIL, a time limit or a cancel ended it).
    - `runner`: the job's driver runs under Shepherd's runner (not an adopted job, nor one from before it).
    - `planned`: a time limit or preemption: the job is ending anyway, the next one must be queued.
    - `container`: mounts need a new container (our launcher without one drops them).
    - `spare_left`, `head_node`: excluding the failing node needs another allocation, unless a spare node
      is left and the node is not the head node (where the driver and Ray's GCS run); `host_up`: and its
      host still runs (a host failure cannot be drained). `spare_for` computes the three.
    - `delay_s`, `wait_s`: the resume's backoff must end within the runner's bound on Shepherd's silence.
    """
    if not runner:
        return "the job's driver does not run under Shepherd's runner"
    if not job_running:
        return "the job no longer runs"
    if planned or resume.let_job_finish:
        return "the job is ending (a time limit or a preemption)"
    if resume.sbatch_args:
        return f"the fix changes the allocation ({' '.join(resume.sbatch_args)})"
    if resume.mounts and container:
        return "the fix mounts another path in the container"
    if resume.exclude_node and head_node:
        return "the failing node is the head node"
    if resume.exclude_node and not host_up:
        return "the failing node's host is down"
    if resume.exclude_node and not spare_left:
        return "the failing node must be excluded and no spare node is left"
    if wait_s is not None and delay_s >= wait_s:
        return f"the backoff ({delay_s:.0f}s) outlasts the runner's wait ({wait_s:.0f}s)"
    return None


def can_restart_in_place(
    resume: Resume,
    *,
    job_running: bool,
    runner: bool = True,
    planned: bool = False,
    container: bool = True,
    spare_left: bool = False,
    head_node: bool = False,
    host_up: bool = True,
    delay_s: float = 0.0,
    wait_s: float | None = None,
) -> bool:
    """Whether the resume restarts in place (`in_place_refusal` says why not)."""
    return (
        in_place_refusal(
            resume,
            job_running=job_running,
            runner=runner,
            planned=planned,
            container=container,
            spare_left=spare_left,
            head_node=head_node,
            host_up=host_up,
            delay_s=delay_s,
            wait_s=wait_s,
        )
        is None
    )
