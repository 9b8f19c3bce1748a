"""Edge cases seen on real Slurm (22.05 and 24.11 alike): a job requeued in held state is held, not finished;
`scontrol hold/release` with the controller down is "unreachable", not "refused"."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import pytest

from supervisor.domain.jobstate import JobState
from supervisor.domain.runs import AttemptRow, AttemptState
from supervisor.slurm.client import SlurmClient, SlurmRejected, SlurmUnavailable
from supervisor.slurm.jobcomp import JobcompReader
from supervisor.slurm.parse import make_comment, make_job_name
from supervisor.slurm.reconcile import UpdateKind, reconcile

from .conftest import SlurmCluster

pytestmark = pytest.mark.slurm


def client_for(cluster: SlurmCluster) -> SlurmClient:
    bin_dir = cluster.env.get("SHEPHERD_SLURM__BIN_DIR")
    return SlurmClient(env=cluster.env, bin_dir=Path(bin_dir) if bin_dir else None, timeout_s=60)


def tagged_job(cluster: SlurmCluster, tmp_path: Path, run_id: str, *extra: str) -> str:
    return cluster.sbatch(
        "-J",
        make_job_name(run_id, 1),
        f"--comment={make_comment(run_id, 1)}",
        "-o",
        str(tmp_path / "%j.out"),
        *extra,
        "--wrap",
        "sleep 300",
        cwd=tmp_path,
    )


def wait_state(cluster: SlurmCluster, job: str, state: str, timeout: float = 60) -> tuple[str, str]:
    deadline = time.monotonic() + timeout
    seen = ("", "")
    while time.monotonic() < deadline:
        seen = cluster.job_state(job)
        if seen[0] == state:
            return seen
        time.sleep(0.3)
    raise AssertionError(f"job {job} not {state} after {timeout}s: {seen}")


def test_a_job_requeued_in_held_state_is_held_not_finished(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    job = tagged_job(slurm_cluster, tmp_path, "r-special-exit")
    try:
        wait_state(slurm_cluster, job, "RUNNING")
        slurm_cluster.run("scontrol", "requeuehold", "State=SpecialExit", job)
        assert wait_state(slurm_cluster, job, "SPECIAL_EXIT") == (
            "SPECIAL_EXIT",
            "job requeued in held state",
        )
        seen = {o.job_id: o for o in anyio.run(client_for(slurm_cluster).squeue)}
        assert seen[job].state is JobState.PENDING and not seen[job].state.is_terminal
        attempt = AttemptRow(
            "r-special-exit", 1, make_comment("r-special-exit", 1), AttemptState.SUBMITTED, job, 0.0, 1.0,
            None, None, "RUNNING", None, None, None, None, None, None, None,
        )  # fmt: skip
        [update] = reconcile([attempt], list(seen.values()), [], now=2.0, grace_s=60)
        assert update.kind is UpdateKind.OBSERVED  # watched as a held job, not ended
        slurm_cluster.run("scontrol", "release", job)
        assert wait_state(slurm_cluster, job, "RUNNING", timeout=120)[0] == "RUNNING"
    finally:
        slurm_cluster.run("scancel", job, check=False)


def test_hold_and_release_with_the_controller_down_are_unreachable_not_refused(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    job = tagged_job(slurm_cluster, tmp_path, "r-hold-ctld-down", "--hold")
    client = client_for(slurm_cluster)
    slurm_cluster.ctld_stop()
    try:
        with pytest.raises(SlurmUnavailable):
            anyio.run(client.release, job)
        with pytest.raises(SlurmUnavailable):
            anyio.run(client.hold, job)
    finally:
        slurm_cluster.ctld_start()
    try:
        # Nothing was done while it was down; the same call, retried, now works, and a real refusal is one.
        assert slurm_cluster.job_state(job) == ("PENDING", "JobHeldUser")
        anyio.run(client.release, job)
        assert slurm_cluster.job_state(job)[1] != "JobHeldUser"
        with pytest.raises(SlurmRejected):
            anyio.run(client.hold, "999999")
    finally:
        slurm_cluster.run("scancel", job, check=False)


def finished_job_found_by_name(cluster: SlurmCluster, client: SlurmClient, tmp: Path, run_id: str) -> None:
    name = make_job_name(run_id, 1)
    job = cluster.sbatch("-J", name, "-o", str(tmp / "%j.out"), "--wrap", "true", cwd=tmp)
    assert cluster.wait_final(job) == "COMPLETED"
    deadline = time.monotonic() + 30  # slurmctld writes the record as the job leaves COMPLETING
    while not (seen := anyio.run(lambda: client.sacct(names=[name]))) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert [(o.job_id, o.state, o.exit_code) for o in seen] == [(job, JobState.COMPLETED, 0)]


def test_lost_intents_without_slurmdbd_read_only_the_new_part_of_the_jobcomp_file(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    client = client_for(slurm_cluster)
    finished_job_found_by_name(slurm_cluster, client, tmp_path, "r-lost-one")
    reader = client.jobcomp
    if "--with-dbd" in slurm_cluster.args:  # slurmdbd filters by name itself
        assert reader is False and client.has_accounting is True
        return
    assert isinstance(reader, JobcompReader)
    read_once, size_once = reader.stats.bytes_read, reader.path.stat().st_size
    finished_job_found_by_name(slurm_cluster, client, tmp_path, "r-lost-two")
    # The second lookup read what was appended since the first (its record and maybe others'), not the file.
    size = reader.path.stat().st_size
    assert 0 < reader.stats.bytes_read - read_once <= size - size_once < size


def test_a_workers_address_is_turned_into_the_node_name_exclude_accepts(slurm_cluster: SlurmCluster) -> None:
    """Ray names a failing worker by IP; `sbatch --exclude=<ip>` refuses the whole submission, so the node
    to exclude is the one whose NodeAddr is that address (the dev node's is 127.0.0.1)."""
    client = client_for(slurm_cluster)
    refused = slurm_cluster.run("sbatch", "--exclude=127.0.0.1", "--wrap", "true", check=False)
    assert refused.returncode != 0 and "Invalid node name" in refused.stderr
    assert anyio.run(client.node_at, "127.0.0.1", "node1") == "node1"
    assert anyio.run(client.node_at, "10.255.0.9", "node1") is None
