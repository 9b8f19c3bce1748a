"""When a resume restarts inside the running job and when it goes back through Slurm."""

from __future__ import annotations

from supervisor.decide.inplace import can_restart_in_place, in_place_refusal, spare_for
from supervisor.decide.plan import Resume

RESUME = Resume("latest", 0.0, "budget allows", env={"HF_HOME": "/shared/hf"})


def test_a_crash_whose_fix_is_environment_and_checkpoint_restarts_in_the_running_job() -> None:
    assert can_restart_in_place(RESUME, job_running=True)


def test_a_job_that_ended_is_resubmitted() -> None:
    assert in_place_refusal(RESUME, job_running=False) == "the job no longer runs"


def test_a_job_whose_driver_has_no_runner_is_resubmitted() -> None:
    assert not can_restart_in_place(RESUME, job_running=True, runner=False)


def test_a_time_limit_or_preemption_is_resubmitted_even_while_the_job_still_runs() -> None:
    assert not can_restart_in_place(RESUME, job_running=True, planned=True)
    assert not can_restart_in_place(Resume("latest", 0.0, "", let_job_finish=True), job_running=True)


def test_a_fix_that_changes_the_allocation_is_resubmitted() -> None:
    why = in_place_refusal(Resume("latest", 0.0, "", sbatch_args=("--mem=0",)), job_running=True)
    assert why == "the fix changes the allocation (--mem=0)"


def test_a_mount_needs_a_new_container_only_when_there_is_one() -> None:
    mount = Resume("latest", 0.0, "", mounts=("/shared/hf",))
    assert not can_restart_in_place(mount, job_running=True, container=True)
    assert can_restart_in_place(mount, job_running=True, container=False)


def test_excluding_a_node_stays_in_place_only_with_a_spare_left_and_never_for_the_head_node() -> None:
    exclude = Resume("latest", 0.0, "", exclude_node=True)
    assert not can_restart_in_place(exclude, job_running=True, spare_left=False)
    assert not can_restart_in_place(exclude, job_running=True, spare_left=True, head_node=True)
    assert can_restart_in_place(exclude, job_running=True, spare_left=True, head_node=False)


def test_a_backoff_longer_than_the_runners_wait_is_resubmitted() -> None:
    assert can_restart_in_place(RESUME, job_running=True, delay_s=60.0, wait_s=600.0)
    why = in_place_refusal(RESUME, job_running=True, delay_s=900.0, wait_s=600.0)
    assert why == "the backoff (900s) outlasts the runner's wait (600s)"


GPU_FAULT = Resume("latest", 0.0, "", exclude_node=True)


def test_a_gpu_fault_on_a_worker_node_with_a_spare_left_drains_that_node_and_restarts_in_place() -> None:
    spare = spare_for("node-2", head_node="node-1", host_up=True, spare_nodes=1)
    assert spare.drain == "node-2"
    assert can_restart_in_place(
        GPU_FAULT,
        job_running=True,
        spare_left=spare.spare_left,
        head_node=spare.head_node,
        host_up=spare.host_up,
    )


def test_the_spare_gone_the_next_fault_resubmits_with_exclude() -> None:
    spare = spare_for("node-3", head_node="node-1", host_up=True, spare_nodes=1, drained=("node-2",))
    assert spare.drain is None
    why = in_place_refusal(
        GPU_FAULT, job_running=True, spare_left=spare.spare_left, head_node=spare.head_node
    )
    assert why == "the failing node must be excluded and no spare node is left"


def test_a_fault_on_the_head_node_resubmits_even_with_spares_left() -> None:
    spare = spare_for("node-1", head_node="node-1", host_up=True, spare_nodes=2)
    assert spare.drain is None
    why = in_place_refusal(
        GPU_FAULT, job_running=True, spare_left=spare.spare_left, head_node=spare.head_node
    )
    assert why == "the failing node is the head node"


def test_a_host_failure_resubmits_even_with_spares_left() -> None:
    spare = spare_for("node-2", head_node="node-1", host_up=False, spare_nodes=2)
    assert spare.drain is None
    why = in_place_refusal(GPU_FAULT, job_running=True, spare_left=spare.spare_left, host_up=spare.host_up)
    assert why == "the failing node's host is down"


def test_a_job_without_spares_resubmits_a_node_fault_and_a_fault_on_no_node_drains_nothing() -> None:
    assert spare_for("node-2", head_node="node-1", host_up=True, spare_nodes=0).drain is None
    assert spare_for(None, head_node="node-1", host_up=True, spare_nodes=1).drain is None


def test_a_second_fault_on_the_node_that_took_the_only_spare_resubmits() -> None:
    spare = spare_for("node-2", head_node="node-1", host_up=True, spare_nodes=1, drained=("node-2",))
    assert not spare.spare_left and spare.drain is None


def test_a_job_whose_head_node_is_not_known_yet_never_drains() -> None:
    assert spare_for("node-2", head_node=None, host_up=True, spare_nodes=1).drain is None
