"""The order pytest-xdist hands test files out in, so that two workers on two cores finish together.

Longest files first (a long file handed out last is a tail with one core idle), and NeMo RL's ray.sub files
(`ray_stop`: each runs alone among the Ray tests, tests/support/raylock.py) each followed by long files
without Ray, one per other worker, so they have work that does not wait for the lock. The seconds are measured
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
    "tests/integration/test_nemo_rl_raysub.py": 478,
    "tests/integration/test_other_slurm_version.py": 340,
    "tests/integration/test_chaos.py": 234,
    "tests/integration/test_daemon.py": 204,
    "tests/integration/test_ray_launch.py": 203,
    "tests/integration/test_rules_resume.py": 172,
    "tests/integration/test_restart_in_place_raysub.py": 166,
    "tests/trainer/test_vllm_learning_ray.py": 155,
    "tests/integration/test_failover.py": 155,
    "tests/integration/test_hang_forensics.py": 137,
    "tests/integration/test_demo.py": 112,
    "tests/integration/test_slack_e2e.py": 99,
    "tests/integration/test_restart_in_place.py": 95,
    "tests/integration/test_resume_points.py": 82,
    "tests/integration/test_faults.py": 69,
    "tests/integration/test_ended_not_written.py": 63,
    "tests/integration/test_health_faults.py": 63,
    "tests/integration/test_slurmdbd_down.py": 63,
    "tests/integration/test_blindness.py": 56,
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
    "tests/trainer/test_runs.py": 124,
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


def file_order(files: Sequence[SuiteFile], workers: int = 2) -> list[str]:
    """Longest first; each ray.sub file followed by the longest files left that start no Ray, one for each
    other worker."""
    by_time = sorted(files, key=lambda f: -f.seconds)  # stable: equal times keep the files' order
    exclusive = [f for f in by_time if f.kind == "ray_stop"]
    plain = [f for f in by_time if f.kind == "plain"]
    order: list[SuiteFile] = []
    for f in exclusive:
        order.append(f)
        for _ in range(max(1, workers - 1)):
            if plain:
                order.append(plain.pop(0))
    placed = {f.path for f in order}
    order += [f for f in by_time if f.path not in placed]
    return [f.path for f in order]
