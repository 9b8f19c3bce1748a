"""Lost-intent lookups without slurmdbd read the jobcomp file once, then only what was appended."""

from __future__ import annotations

import os
from pathlib import Path

from supervisor.domain.jobstate import JobState
from supervisor.slurm.jobcomp import JobcompReader


def record(job_id: int, name: str, state: str = "COMPLETED", exit_code: str = "0:0") -> str:
    return (
        f"JobId={job_id} UserId=root(0) GroupId=root(0) Name={name} JobState={state} Partition=debug "
        "TimeLimit=10 StartTime=2026-11-24T01:27:17 EndTime=2026-11-24T01:27:35 NodeList=node1 NodeCnt=1 "
        "ProcCnt=1 WorkDir=/w ReservationName= Tres=cpu=1 Account= QOS= WcKey= Cluster=unknown "
        "SubmitTime=2026-11-24T01:27:17 EligibleTime=2026-11-24T01:27:17 DerivedExitCode=0:0 "
        f"ExitCode={exit_code}\n"
    )


def test_a_lookup_finds_our_jobs_and_the_next_one_reads_only_what_was_appended(tmp_path: Path) -> None:
    path = tmp_path / "jobcomp.txt"
    path.write_text("".join(record(i, f"someone-else-{i}") for i in range(1000)) + record(1000, "shep-r-a1"))
    reader = JobcompReader(path)
    [found] = reader.lookup(["shep-r-a1", "shep-gone-a1"])
    assert (found.job_id, found.state, found.exit_code) == ("1000", JobState.COMPLETED, 0)
    assert found.tag == ("r", 1)
    first = reader.stats.bytes_read
    assert first == path.stat().st_size and reader.stats.records_kept == 1  # others' records are not kept

    appended = record(1001, "shep-s-a2", "FAILED", "0:9")
    with path.open("a") as fh:
        fh.write(appended)
    [s] = reader.lookup(["shep-s-a2"])
    assert (s.state, s.exit_code, s.signal) == (JobState.FAILED, 0, 9)
    assert reader.stats.bytes_read - first == len(appended)


def test_a_half_written_record_waits_for_its_newline(tmp_path: Path) -> None:
    path = tmp_path / "jobcomp.txt"
    line = record(7, "shep-r-a1")
    path.write_text(line[:40])
    reader = JobcompReader(path)
    assert reader.lookup(["shep-r-a1"]) == []
    with path.open("a") as fh:
        fh.write(line[40:])
    assert [o.job_id for o in reader.lookup(["shep-r-a1"])] == ["7"]


def test_a_rotated_file_is_read_again_from_its_start(tmp_path: Path) -> None:
    path = tmp_path / "jobcomp.txt"
    path.write_text(record(1, "shep-r-a1"))
    reader = JobcompReader(path)
    assert reader.lookup(["shep-r-a1"])
    os.rename(path, tmp_path / "jobcomp.txt.1")
    path.write_text(record(2, "shep-r-a2"))
    assert [o.job_id for o in reader.lookup(["shep-r-a2"])] == ["2"]
    assert reader.stats.rereads == 1
