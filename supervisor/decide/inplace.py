"""Whether a resume the policy allowed runs again inside the job that failed (its runner waiting for
Shepherd's word) or goes back through Slurm: a pure function, so the daemon and bench/goodput.py decide alike.

Keeping the allocation saves the queue, Ray's start-up and the job's set-up at every failure; it is possible
only while the job runs, its driver runs under the runner, and the fix changes nothing Slurm gave the job
(docs/policy.md, "Restart in place")."""

from __future__ import annotations

from supervisor.decide.plan import Resume


def in_place_refusal(
    resume: Resume,
    *,
    job_running: bool,
    runner: bool = True,
    planned: bool = False,
    container: bool = True,
    spare_left: bool = False,
    head_node: bool = False,
    delay_s: float = 0.0,
    wait_s: float | None = None,
) -> str | None:
    """Why the resume cannot restart in place, or None when it can.

    - `job_running`: Slurm says the job runs (a NODE_FAIL, a time limit or a cancel ended it).
    - `runner`: the job's driver runs under Shepherd's runner (not an adopted job, nor one from before it).
    - `planned`: a time limit or preemption: the job is ending anyway, the next one must be queued.
    - `container`: mounts need a new container (our launcher without one drops them).
    - `spare_left`, `head_node`: excluding the failing node needs another allocation, unless a spare node
      is left and the node is not the head node (where the driver and Ray's GCS run).
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
    if resume.exclude_node and (head_node or not spare_left):
        return "the failing node is the head node" if head_node else "the failing node must be excluded"
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
            delay_s=delay_s,
            wait_s=wait_s,
        )
        is None
    )
