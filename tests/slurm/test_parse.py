"""The Slurm parsers, on output recorded from the real dev clusters.

Every version has a folder tests/data/slurm/<version>/ (scripts/record-slurm-outputs; 22.05 and 24.11 today);
the recorded-output tests run once per folder."""

from pathlib import Path

import pytest

from supervisor.domain.jobstate import JobState
from supervisor.slurm.parse import (
    JobObservation,
    looks_unreachable,
    node_for_address,
    parse_exit_code,
    parse_sacct,
    parse_sbatch_parsable,
    parse_scontrol_config,
    parse_squeue,
    parse_state,
)

DATA_ROOT = Path(__file__).parents[1] / "data" / "slurm"
VERSIONS = sorted(p.name for p in DATA_ROOT.iterdir() if p.is_dir()) if DATA_ROOT.is_dir() else []
# One run per recorded Slurm version; `data` is that version's folder.
per_version = pytest.mark.parametrize("data", [DATA_ROOT / v for v in VERSIONS], ids=VERSIONS)

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


@pytest.mark.parametrize("word", ["SPECIAL_EXIT", "SE", "REQUEUE_HOLD", "RESV_DEL_HOLD"])
def test_a_job_requeued_in_held_state_is_held_pending_not_finished(word: str) -> None:
    assert parse_state(word) is JobState.PENDING
    assert parse_state(word).is_active and not parse_state(word).is_terminal


def test_expediting_from_slurm_25_11_is_a_known_requeued_state() -> None:
    line = "77|shep-r-a1|EXPEDITING|None|shepherd:run=r:attempt=1|||0:00|1:00\n"
    jobs, problems = parse_squeue(line)
    assert problems == []
    assert jobs[0].state is JobState.REQUEUED and jobs[0].state.is_active


def test_an_unknown_future_state_word_is_reported_and_never_finished() -> None:
    jobs, problems = parse_squeue("78|shep-r-a1|FROBNICATING|None|shepherd:run=r:attempt=1|||0:00|1:00\n")
    assert [j.state for j in jobs] == [JobState.UNKNOWN]
    assert not jobs[0].state.is_terminal
    assert [p.state_word for p in problems] == ["FROBNICATING"]
    sacct_jobs, sacct_problems = parse_sacct("78|shep-r-a1|FROBNICATING by 0|0:0||n1|s|e|0:01|None\n")
    assert not sacct_jobs[0].state.is_terminal and sacct_problems[0].state_word == "FROBNICATING"


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
    # No slurm.conf on this machine and none from DNS (seen with SLURM_CONF unset): nobody was asked.
    assert looks_unreachable(
        "sbatch: error: resolve_ctls_from_dns_srv: res_nsearch error: Unknown host\n"
        "sbatch: error: fetch_config: DNS SRV lookup failed\n"
        "sbatch: error: _establish_config_source: failed to fetch config\n"
        "sbatch: fatal: Could not establish a configuration source"
    )


def test_both_versions_are_recorded() -> None:
    assert {"22.05", "24.11"} <= set(VERSIONS)


def recorded(data: Path, name: str) -> tuple[str, str, int]:
    """(stdout, stderr, exit status) of one recorded command."""
    err = data / f"{name}.stderr"
    rc = data / f"{name}.rc"
    return (
        (data / f"{name}.txt").read_text(),
        err.read_text() if err.exists() else "",
        int(rc.read_text()) if rc.exists() else 0,
    )


def by_situation(jobs: list[JobObservation]) -> dict[str, JobObservation]:
    """Recorded jobs by the situation in their tag (`shep-r-<situation>-a1`)."""
    out = {}
    for j in jobs:
        assert j.tag is not None, j
        out[j.tag[0].removeprefix("r-")] = j
    return out


@per_version
def test_every_recorded_squeue_and_sacct_file_parses_without_problems(data: Path) -> None:
    checked = 0
    for f in sorted(data.glob("squeue_*.txt")):  # all of them in Shepherd's -o format
        _, problems = parse_squeue(f.read_text())
        assert problems == [], f
        checked += 1
    for f in sorted(data.glob("sacct_*.txt")):
        if "all_fields" in f.name:  # a different -o list, kept for reference
            continue
        _, problems = parse_sacct(f.read_text())
        assert problems == [], f
        checked += 1
    assert checked >= 15


FINISHED = {
    "ok": JobState.COMPLETED,
    "fail3": JobState.FAILED,
    "cancel": JobState.CANCELLED,
    "timeout": JobState.TIMEOUT,
    "oom": JobState.OUT_OF_MEMORY,
    "rejected": JobState.FAILED,  # sbatch said no (rc 1) and still left this record
}
PENDING_REASONS = {
    "resources": "Resources",
    "priority": "Priority",
    "dependency": "Dependency",
    "never": "DependencyNeverSatisfied",
    "begin": "BeginTime",
    "held-user": "JobHeldUser",
    "held-admin": "JobHeldAdmin",
    "part-limit": "PartitionTimeLimit",
    "hold-release": "BeginTime",  # held, then released: back to waiting for its begin time
}


@per_version
def test_squeue_gives_each_recorded_situation_its_state_and_reason(data: Path) -> None:
    jobs = by_situation(parse_squeue(recorded(data, "squeue_nodbd")[0])[0])
    for situation, state in FINISHED.items():
        assert jobs[situation].state is state, situation
    assert jobs["rejected"].reason == "BadConstraints"
    for situation, reason in PENDING_REASONS.items():
        assert (jobs[situation].state, jobs[situation].reason) == (JobState.PENDING, reason), situation
    assert jobs["running"].state is JobState.RUNNING and jobs["running"].nodes
    # `scontrol hold` of a running job: exit 0, the job keeps running, only the reason says held.
    assert (jobs["held-running"].state, jobs["held-running"].reason) == (JobState.RUNNING, "JobHeldAdmin")
    dbd = by_situation(parse_squeue(recorded(data, "squeue_dbd")[0])[0])
    assert dbd["qos-second"].reason == "QOSMaxJobsPerUserLimit"


@per_version
def test_squeue_time_limit_is_unlimited_or_365_days_for_a_job_held_while_running(data: Path) -> None:
    limits = {
        line.split("|")[1]: line.split("|")[8] for line in recorded(data, "squeue_nodbd")[0].splitlines()
    }
    assert limits["shep-r-running-a1"] == "UNLIMITED"
    assert limits["shep-r-timeout-a1"] == "1:00"
    assert limits["shep-r-held-running-a1"] == "365-00:00:00"


@per_version
def test_special_exit_is_held_not_finished(data: Path) -> None:
    job = by_situation(parse_squeue(recorded(data, "squeue_nodbd")[0])[0])["special-exit"]
    assert job.reason == "job requeued in held state"
    assert not job.state.is_terminal


@per_version
def test_sacct_exit_codes_and_states_with_and_without_slurmdbd(data: Path) -> None:
    for name in ("sacct_jobcomp_ids", "sacct_dbd_ids"):
        jobs = by_situation(parse_sacct(recorded(data, name)[0])[0])
        assert (jobs["ok"].state, jobs["ok"].exit_code, jobs["ok"].signal) == (JobState.COMPLETED, 0, 0), name
        assert (jobs["fail3"].state, jobs["fail3"].exit_code) == (JobState.FAILED, 3), name
        assert jobs["cancel"].state is JobState.CANCELLED, name
        assert jobs["timeout"].state is JobState.TIMEOUT, name
        # OOM reads as exit status 0 with "signal" 125.
        assert (jobs["oom"].state, jobs["oom"].exit_code, jobs["oom"].signal) == (
            JobState.OUT_OF_MEMORY,
            0,
            125,
        )
    dbd = by_situation(parse_sacct(recorded(data, "sacct_dbd_ids")[0])[0])
    assert dbd["ok"].tag == ("r-ok", 1) and dbd["ok"].comment == "shepherd:run=r-ok:attempt=1"


@per_version
def test_sacct_c_ignores_name_and_time_filters(data: Path) -> None:
    # The lost-intent query (--name X -S -E) against the jobcomp file returns every finished job.
    names = {j.name for j in parse_sacct(recorded(data, "sacct_jobcomp_names")[0])[0]}
    assert {"shep-r-ok-a1", "shep-r-fail3-a1"} < names and "shep-r-timeout-a1" in names
    dbd_names = {j.name for j in parse_sacct(recorded(data, "sacct_dbd_names")[0])[0]}
    assert dbd_names == {"shep-r-ok-a1", "shep-r-fail3-a1"}


@per_version
def test_without_cgroups_an_oom_kill_is_a_failed_job_killed_by_signal_9(data: Path) -> None:
    [job] = parse_sacct(recorded(data, "sacct_jobcomp_oom_nocgroup")[0])[0]
    assert (job.state, job.exit_code, job.signal) == (JobState.FAILED, 0, 9)
    [sq] = parse_squeue(recorded(data, "squeue_oom_nocgroup")[0])[0]
    assert sq.state is JobState.FAILED
    assert "exceeded memory limit" in recorded(data, "joblog_oom_nocgroup")[0]


@per_version
def test_sbatch_parsable_and_the_job_nodes_query(data: Path) -> None:
    assert parse_sbatch_parsable(recorded(data, "sbatch_parsable")[0]) == "1000"
    assert recorded(data, "jobnodes_running")[0].strip()


@per_version
@pytest.mark.parametrize("name", ["squeue_ctld_down", "sbatch_ctld_down", "scancel_ctld_down"])
def test_controller_down_errors_read_as_unreachable(data: Path, name: str) -> None:
    out, err, rc = recorded(data, name)
    assert rc != 0 and out == ""
    assert looks_unreachable(err), err


@per_version
@pytest.mark.parametrize("name", ["scontrol_hold_ctld_down", "scontrol_release_ctld_down"])
def test_scontrol_with_the_controller_down_reads_as_unreachable(data: Path, name: str) -> None:
    _, err, rc = recorded(data, name)
    assert rc == 1
    assert looks_unreachable(err), err


@per_version
@pytest.mark.parametrize(
    "name",
    [
        "sbatch_rejected_resources",
        "sbatch_rejected_partition",
        "sbatch_rejected_account",
        "scontrol_hold_unknown_job",
        "squeue_unknown_job",
    ],
)
def test_refusals_are_not_read_as_unreachable(data: Path, name: str) -> None:
    _, err, rc = recorded(data, name)
    assert rc == 1 and err.strip()
    assert not looks_unreachable(err), err


@per_version
@pytest.mark.parametrize(
    "name",
    ["scancel_unknown_job", "scancel_finished_job", "scancel_signal", "scontrol_hold", "scontrol_release"],
)
def test_silent_successes(data: Path, name: str) -> None:
    assert recorded(data, name) == ("", "", 0)


@per_version
def test_scontrol_show_config_says_there_is_no_slurmdbd_and_where_the_jobcomp_file_is(data: Path) -> None:
    config = parse_scontrol_config(recorded(data, "scontrol_show_config_nodbd")[0])
    assert config["AccountingStorageType"] in ("accounting_storage/none", "(null)")  # 22.05, 24.11
    assert config["JobCompType"] == "jobcomp/filetxt"
    assert config["JobCompLoc"].startswith("/") and config["JobCompLoc"].endswith("/log/jobcomp.txt")


@per_version
def test_sacct_without_accounting_says_so_in_the_words_the_client_looks_for(data: Path) -> None:
    _, err, rc = recorded(data, "sacct_no_accounting")
    assert rc == 1 and "accounting storage is disabled" in err.lower()


def test_scontrol_show_job_one_line_becomes_fields_even_with_spaces_in_a_value() -> None:
    from supervisor.slurm.parse import parse_scontrol_job

    text = (
        "JobId=233 JobName=ray-job UserId=me(1000) JobState=RUNNING Reason=None "
        "Command=/shared/RL/ray.sub WorkDir=/shared/me/RL StdOut=/shared/me/RL/slurm-233.out "
        "Comment=a comment with spaces TimeLimit=04:00:00\n"
    )
    fields = parse_scontrol_job(text)
    assert fields["JobId"] == "233" and fields["JobState"] == "RUNNING"
    assert fields["WorkDir"] == "/shared/me/RL" and fields["StdOut"] == "/shared/me/RL/slurm-233.out"
    assert fields["Comment"] == "a comment with spaces" and fields["TimeLimit"] == "04:00:00"
    assert parse_scontrol_job("") == {}


def test_an_overlong_slurm_line_is_reported_not_split() -> None:
    from supervisor.slurm.parse import MAX_LINE_CHARS

    long_line = "1|shep-x-a1|RUNNING|None|" + "c" * MAX_LINE_CHARS + "|n1|now|0:01|1:00"
    jobs, problems = parse_squeue(long_line + "\n")
    assert jobs == []
    assert "characters (limit" in problems[0].reason and len(problems[0].line) <= 200
    jobs, problems = parse_sacct(long_line + "|x|y|z|w\n")
    assert jobs == [] and problems


def test_an_address_names_the_node_whose_nodeaddr_or_hostname_it_is() -> None:
    sinfo = "gpu-a01 10.64.1.1 gpu-a01\ngpu-a02 10.64.1.2 gpu-a02\ngpu-b07 gpu-b07 gpu-b07\n"
    assert node_for_address(sinfo, "10.64.1.2") == "gpu-a02"
    assert node_for_address(sinfo, "10.64.2.7", "gpu-b07.cluster.example") == "gpu-b07"  # reverse DNS
    assert node_for_address(sinfo, "10.64.9.9", "login1.cluster.example") is None
    assert node_for_address("", "10.64.1.2") is None


def test_the_first_node_of_a_slurm_node_list_is_where_ray_sub_runs_the_head() -> None:
    from supervisor.slurm.parse import first_node

    assert first_node("gpu[007-009,012],cpu1") == "gpu007"
    assert first_node("node1,node2") == "node1"
    assert first_node("dev1") == "dev1"
    assert first_node("") is None and first_node(None) is None and first_node("(null)") is None


def test_a_nodes_host_is_down_when_slurm_says_down_not_responding_or_powered_off() -> None:
    from supervisor.slurm.parse import host_down

    # As `scontrol -o show node` printed them on the dev cluster (22.05) after `scontrol update state=...`.
    assert host_down("DOWN")
    assert not host_down("IDLE") and not host_down("IDLE+DRAIN") and not host_down("IDLE+FAIL")
    # Slurm's other forms: the short NOT_RESPONDING mark, the flag spelt out, a powered-off node.
    assert host_down("DOWN*+DRAIN") and host_down("IDLE*") and host_down("MIXED+NOT_RESPONDING")
    assert host_down("IDLE+POWERED_DOWN") and host_down("IDLE~")
    assert not host_down("MIXED+DRAIN") and not host_down("ALLOCATED+COMPLETING")
    # A requested power-down or reboot waits for the jobs; an issued reboot or a boot runs none.
    assert not host_down("MIXED+POWER_DOWN") and not host_down("MIXED+REBOOT_REQUESTED")
    assert host_down("DOWN+REBOOT_ISSUED") and host_down("IDLE+POWERING_UP")
