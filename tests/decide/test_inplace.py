"""When a resume restarts inside the running job and when it goes back through Slurm."""

from __future__ import annotations

from supervisor.decide.inplace import can_restart_in_place, in_place_refusal
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
