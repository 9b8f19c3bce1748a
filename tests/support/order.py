"""The order pytest-xdist hands test files out in, so that the workers finish together and none sits idle
waiting for the Ray lock.

NeMo RL's ray.sub files (`ray_stop`: each runs alone among the Ray tests, tests/support/raylock.py) are one
unit of work for xdist (`scope`, through tests/conftest.py's scheduler): one worker runs them back to back.
Handed out as separate files, a second worker took one while the first ran and waited for the lock (570 s of
idle workers in the 2026-11-27 clean-ci). That unit goes first; then files without Ray, longest first, enough
to keep the other workers busy while it runs (they would wait for the lock with a Ray file); then the rest,
longest first (a long file handed out last is a tail with the other workers idle). The seconds are measured
(scripts/test prints the slowest 20 tests; these are whole files on the 2-core machine, 2026-11-27), used
only for the order; a file not listed is guessed from its number of tests. The integration tier runs with
`--no-loadscope-reorder`: xdist's own reorder (most tests first) would undo this.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

Kind = Literal["ray_stop", "ray", "plain"]

SECONDS: dict[str, int] = {
    "tests/integration/test_nemo_rl_raysub.py": 560,
    "tests/integration/test_other_slurm_version.py": 240,
    "tests/integration/test_chaos.py": 234,
    "tests/integration/test_daemon.py": 155,
    "tests/integration/test_ray_launch.py": 250,
    "tests/integration/test_rules_resume.py": 172,
    "tests/integration/test_restart_in_place_raysub.py": 166,
    "tests/trainer/test_vllm_learning_ray.py": 260,
    "tests/integration/test_failover.py": 190,
    "tests/integration/test_hang_forensics.py": 137,
    "tests/integration/test_demo.py": 112,
    "tests/integration/test_slack_e2e.py": 99,
    "tests/integration/test_restart_in_place.py": 95,
    "tests/integration/test_resume_points.py": 70,
    "tests/integration/test_faults.py": 69,
    "tests/integration/test_ended_not_written.py": 63,
    "tests/integration/test_health_faults.py": 63,
    "tests/integration/test_slurmdbd_down.py": 63,
    "tests/integration/test_blindness.py": 40,
    "tests/store/test_store_on_netfs.py": 53,
    "tests/trainer/test_vllm_backend.py": 49,
    "tests/integration/test_job_secrets.py": 49,
    "tests/integration/test_systemd_user_unit.py": 46,
    "tests/integration/test_slurm_hosted_daemon.py": 42,
    "tests/integration/test_slurm_edge_cases.py": 41,
    "tests/integration/test_doctor.py": 34,
    "tests/integration/test_unrecognised_evidence_e2e.py": 32,
    "tests/integration/test_tune_interval.py": 27,
    "tests/integration/test_wheel_install.py": 25,
    "tests/trainer/test_learning_ray.py": 25,
    "tests/integration/test_hostile_inputs.py": 20,
    "tests/integration/test_metrics_live.py": 19,
    "tests/integration/test_daemon_restart_rules.py": 18,
    "tests/integration/test_requeue_chain.py": 17,
    "tests/integration/test_dev_cluster.py": 15,
    "tests/integration/test_nemo_rl.py": 14,
    "tests/integration/test_incidents_e2e.py": 12,
    "tests/integration/test_log_fs_full.py": 12,
    "tests/integration/test_nemo_rl_gres.py": 10,
    "tests/trainer/test_runs.py": 30,
    "tests/trainer/test_gpu_machine.py": 21,
    "tests/cli/test_pipe.py": 11,
    "tests/cli/test_status_unclaimed.py": 9,
    "tests/cli/test_settings_errors.py": 8,
    "tests/report/test_goodput_bench.py": 7,
    "tests/lease/test_lease_keeper.py": 6,
    "tests/trainer/test_units.py": 5,
    "tests/daemon/test_monitor_tensorboard.py": 5,
    "tests/store/test_store.py": 4,
}
GUESS_PER_TEST_S = {"ray_stop": 60.0, "ray": 30.0, "plain_real": 10.0, "plain": 0.1}


@dataclass(frozen=True, slots=True)
class SuiteFile:
    path: str  # relative to the repository, as in SECONDS
    kind: Kind
    tests: int
    real_parts: bool  # any test of it needs Slurm, Ray, vLLM or FUSE

    @property
    def seconds(self) -> float:
        if self.path in SECONDS:
            return float(SECONDS[self.path])
        key = self.kind if self.kind != "plain" else ("plain_real" if self.real_parts else "plain")
        return GUESS_PER_TEST_S[key] * self.tests


# Every file with a `ray_stop` test (tests/test_suite_order.py checks the list against the sources): xdist's
# scheduler runs in the controlling process, which sees test ids, not markers.
RAY_SUB_FILES = (
    "tests/integration/test_nemo_rl_raysub.py",
    "tests/integration/test_restart_in_place_raysub.py",
    "tests/integration/test_resume_points.py",
    "tests/integration/test_job_secrets.py",
)
RAY_SUB_UNIT = "NeMo RL's ray.sub files (tests/support/order.py)"


def scope(nodeid: str) -> str:
    """A test's unit of work in the integration tier: its file, or the one unit of ray.sub files."""
    path = nodeid.split("::", 1)[0]
    return RAY_SUB_UNIT if path in RAY_SUB_FILES else path


def file_order(files: Sequence[SuiteFile], workers: int = 2) -> list[str]:
    """The ray.sub files first (one unit), then files without Ray, longest first, until they fill the other
    workers for as long as the unit runs; then the rest, longest first."""
    by_time = sorted(files, key=lambda f: -f.seconds)  # stable: equal times keep the files' order
    exclusive = [f for f in by_time if f.kind == "ray_stop"]
    budget = max(1, workers - 1) * sum(f.seconds for f in exclusive)
    order = list(exclusive)
    for f in by_time:
        if f.kind == "plain" and budget > 0:
            order.append(f)
            budget -= f.seconds
    placed = {f.path for f in order}
    order += [f for f in by_time if f.path not in placed]
    return [f.path for f in order]
