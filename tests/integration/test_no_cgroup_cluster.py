"""A cluster without cgroups (as on CI machines without cgroup v1): it starts on every version (24.11's slurmd
needs `CgroupPlugin=disabled`), and Slurm's own memory limit kills a job in words the host-oom rule knows."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from supervisor.domain.jobstate import describe_exit
from supervisor.rules.engine import MatcherState, load_ruleset
from supervisor.rules.replay import replay_text

from .conftest import SLURM_VERSION, SlurmCluster, private_cluster, private_env

pytestmark = [pytest.mark.slurm, pytest.mark.slow]


@pytest.fixture(scope="module")
def no_cgroup_cluster(slurm_cluster: SlurmCluster) -> Iterator[SlurmCluster]:
    with private_cluster(slurm_cluster, private_env(50), "--no-cgroup") as cluster:
        yield cluster


def test_the_cluster_runs_without_cgroups_and_says_so_in_cgroup_conf(no_cgroup_cluster: SlurmCluster) -> None:
    conf_dir = Path(no_cgroup_cluster.conf).parent
    cgroup_conf = (conf_dir / "cgroup.conf").read_text().splitlines()
    expected = "CgroupPlugin=disabled" if SLURM_VERSION != "22.05" else "CgroupPlugin=cgroup/v1"
    assert expected in cgroup_conf  # 22.05 knows no "disabled" and ignores the plugin without cgroup tasks
    slurm_conf = (conf_dir / "slurm.conf").read_text()
    assert "ProctrackType=proctrack/linuxproc" in slurm_conf and "TaskPlugin=task/none" in slurm_conf
    assert no_cgroup_cluster.nodes()


def test_slurms_memory_limit_kill_without_cgroups_is_host_oom(
    no_cgroup_cluster: SlurmCluster, tmp_path: Path
) -> None:
    # `tail` holds 500 MB until `sleep` ends: bounded, should the kill not come.
    job = no_cgroup_cluster.sbatch(
        "--mem=100", "-o", str(tmp_path / "%j.out"), "--wrap", "head -c 500M /dev/zero | tail | sleep 60",
        cwd=tmp_path,
    )  # fmt: skip
    assert no_cgroup_cluster.wait_final(job, timeout=90) in ("FAILED", "CANCELLED")
    # ExitCode 0:9: status 0, killed by SIGKILL; shown as the signal, never as "exit 0".
    code, _, signal = no_cgroup_cluster.exit_code(job).partition(":")
    assert describe_exit(int(code), int(signal)) == "signal 9 (SIGKILL)"
    log = (tmp_path / f"{job}.out").read_text()
    assert "exceeded memory limit" in log, log
    fired = replay_text(load_ruleset(), log, "slurm.log", MatcherState(run_id="r1", attempt=1))
    assert [m.rule for m in fired if not m.followup] == ["host-oom"]
