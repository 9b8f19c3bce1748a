"""The Slurm client reports a state word it does not know once, however often Slurm prints it, and looks
lost intents up in the jobcomp file itself when Slurm keeps no accounting."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from structlog.testing import capture_logs

from supervisor.domain.jobstate import JobState
from supervisor.slurm.client import SlurmClient
from supervisor.slurm.jobcomp import JobcompReader

DATA = Path(__file__).parents[1] / "data" / "slurm"


def fake_squeue(bin_dir: Path, lines: str) -> None:
    # A stand-in squeue that prints what a newer Slurm would: the parser's input, not Slurm's behaviour.
    bin_dir.mkdir(exist_ok=True)
    exe = bin_dir / "squeue"
    exe.write_text(f"#!/bin/sh\ncat <<'EOF'\n{lines}EOF\n")
    exe.chmod(0o755)


def test_an_unknown_state_word_is_reported_once_and_the_job_is_never_finished(tmp_path: Path) -> None:
    fake_squeue(
        tmp_path / "bin",
        "90|shep-r-a1|FROBNICATING|None|shepherd:run=r:attempt=1|||0:00|1:00\n"
        "91|shep-s-a1|FROBNICATING|None|shepherd:run=s:attempt=1|||0:00|1:00\n",
    )
    client = SlurmClient(bin_dir=tmp_path / "bin")

    async def poll_three_times() -> list[list[JobState]]:
        return [[j.state for j in await client.squeue()] for _ in range(3)]

    with capture_logs() as logs:
        seen = anyio.run(poll_three_times)
    assert seen == [[JobState.UNKNOWN, JobState.UNKNOWN]] * 3
    reports = [e for e in logs if e.get("state") == "FROBNICATING"]
    assert len(reports) == 1 and reports[0]["log_level"] == "warning"
    assert not any("line not understood" in e["event"] for e in logs)


@pytest.mark.parametrize("version", ["22.05", "24.11"])
def test_without_slurmdbd_a_lost_intent_is_read_from_the_jobcomp_file_not_asked_of_sacct(
    tmp_path: Path, version: str
) -> None:
    # scontrol prints the recorded config of that version, its JobCompLoc pointing here; there is no sacct at
    # all in the bin dir, so asking it would fail.
    jobcomp = tmp_path / "jobcomp.txt"
    jobcomp.write_text(
        "JobId=5 UserId=root(0) GroupId=root(0) Name=shep-r-a1 JobState=FAILED Partition=debug NodeList=n1 "
        "StartTime=2026-11-24T01:00:00 ExitCode=3:0\n"
    )
    config = (DATA / version / "scontrol_show_config_nodbd.txt").read_text()
    config = "\n".join(
        f"JobCompLoc              = {jobcomp}" if line.startswith("JobCompLoc ") else line
        for line in config.splitlines()
    )
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "scontrol").write_text(f"#!/bin/sh\ncat <<'EOF'\n{config}\nEOF\n")
    (bin_dir / "scontrol").chmod(0o755)
    client = SlurmClient(bin_dir=bin_dir)
    [found] = anyio.run(lambda: client.sacct(names=["shep-r-a1"]))
    assert (found.job_id, found.state, found.exit_code) == ("5", JobState.FAILED, 3)
    assert isinstance(client.jobcomp, JobcompReader) and client.stats.calls == {"scontrol": 1}
    anyio.run(lambda: client.sacct(names=["shep-r-a1"]))
    assert client.stats.calls == {"scontrol": 1}  # the config is asked once
