"""The Slurm client reports a state word it does not know once, however often Slurm prints it."""

from __future__ import annotations

from pathlib import Path

import anyio
from structlog.testing import capture_logs

from supervisor.domain.jobstate import JobState
from supervisor.slurm.client import SlurmClient


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
