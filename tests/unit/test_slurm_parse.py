"""The Slurm parsers, on output recorded from the real dev cluster (Slurm 22.05)."""

from pathlib import Path

import pytest

from supervisor.events import JobState
from supervisor.slurm.parse import (
    looks_unreachable,
    parse_exit_code,
    parse_sacct,
    parse_sbatch_parsable,
    parse_squeue,
    parse_state,
)

DATA = Path(__file__).parents[1] / "data" / "slurm" / "22.05"

# Recorded on the dev cluster with `sacct -c -P -n -X -o <SACCT_FIELDS>` (jobcomp mode: no Comment).
SACCT_JOBCOMP = (
    "3|shep-smoke-fail-20261121-193204-cb4d-a1|FAILED|3:0||node1|2026-11-21T19:32:05|2026-11-21T19:32:05|00:00:00|\n"
    "4|shep-smoke-ok-20261121-193203-b8d6-a1|COMPLETED|0:0||node1|2026-11-21T19:32:05|2026-11-21T19:32:07|00:00:02|\n"
)


def test_sacct_jobcomp_rows_give_state_exit_code_and_tag_from_the_job_name() -> None:
    jobs, problems = parse_sacct(SACCT_JOBCOMP)
    assert problems == []
    failed, ok = jobs
    assert (failed.job_id, failed.state, failed.exit_code, failed.signal) == ("3", JobState.FAILED, 3, 0)
    assert failed.tag == ("smoke-fail-20261121-193204-cb4d", 1)
    assert ok.state is JobState.COMPLETED and ok.exit_code == 0 and ok.nodes == "node1"


def test_squeue_rows_carry_reason_and_comment_tag() -> None:
    out = (
        "17|shep-r-test-a2|PENDING|QOSMaxJobsPerUserLimit|shepherd:run=r-test:attempt=2|||0:00|1:00:00\n"
        "16|shep-r-test-a1|RUNNING|None|shepherd:run=r-test:attempt=1|node1|2026-11-21T19:00:00|0:05|1:00:00\n"
        "12|other-job|COMPLETED|None|(null)|node1|2026-11-21T18:00:00|0:01|1:00:00\n"
    )
    jobs, problems = parse_squeue(out)
    assert problems == []
    pending, running, other = jobs
    assert pending.state is JobState.PENDING and pending.reason == "QOSMaxJobsPerUserLimit"
    assert pending.tag == ("r-test", 2)
    assert running.reason == "" and running.nodes == "node1"
    assert other.tag is None and other.comment == ""


def test_garbage_lines_are_reported_not_guessed() -> None:
    jobs, problems = parse_squeue("not|a|job\n18|x|RUNNING|None||n|s|t|l\nabc|x|RUNNING|None||n|s|t|l\n")
    assert [j.job_id for j in jobs] == ["18"]
    assert [p.line_no for p in problems] == [1, 3]


@pytest.mark.parametrize(
    ("text", "state"),
    [
        ("CANCELLED by 0", JobState.CANCELLED),
        ("OUT_OF_MEMORY", JobState.OUT_OF_MEMORY),
        ("TO", JobState.TIMEOUT),
        ("NF", JobState.NODE_FAIL),
        ("FAILED+", JobState.FAILED),
        ("", JobState.UNKNOWN),
        ("WHATEVER", JobState.UNKNOWN),
    ],
)
def test_states(text: str, state: JobState) -> None:
    assert parse_state(text) is state


def test_exit_codes_and_sbatch_output() -> None:
    assert parse_exit_code("0:125") == (0, 125)
    assert parse_exit_code("junk") == (None, None)
    assert parse_sbatch_parsable("12\n") == "12"
    assert parse_sbatch_parsable("12;shepherd-dev\n") == "12"
    with pytest.raises(ValueError):
        parse_sbatch_parsable("sbatch: error: Batch job submission failed\n")


def test_controller_down_is_unreachable_not_a_verdict() -> None:
    assert looks_unreachable("squeue: error: Unable to contact slurm controller (connect failure)")
    assert not looks_unreachable("sbatch: error: Invalid account or account/partition combination specified")


@pytest.mark.skipif(not DATA.is_dir(), reason="no recorded outputs in tests/data/slurm/22.05")
def test_every_recorded_squeue_and_sacct_file_parses_without_problems() -> None:
    checked = 0
    for f in sorted(DATA.glob("squeue*.txt")):
        _, problems = parse_squeue(f.read_text())
        assert problems == [], f
        checked += 1
    for f in sorted(DATA.glob("sacct*.txt")):
        if "all_fields" in f.name:  # a different -o list, kept for reference
            continue
        _, problems = parse_sacct(f.read_text())
        assert problems == [], f
        checked += 1
    assert checked > 0
