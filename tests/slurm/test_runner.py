"""The job-side runner (runner.sh, POSIX sh) and the daemon's half of its protocol (runner.py).

The script runs for real under dash here: each case has its words written before it needs them, or a bound
of zero, so nothing waits."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from supervisor.slurm.launchers import runner

SH = shutil.which("dash") or "/bin/sh"


def run_runner(tmp: Path, *argv: str, wait_s: int = 0) -> subprocess.CompletedProcess[str]:
    script = tmp / "runner.sh"
    script.write_text(runner.script_text())
    env = {
        "PATH": os.environ["PATH"],
        "SLURM_JOB_ID": "4242",
        "BASE_LOG_DIR": str(tmp),
        runner.ENV_DIR: str(runner.runner_dir(tmp, "4242")),  # the tests write words there beforehand
        runner.ENV_WAIT: str(wait_s),
        runner.ENV_POLL: "1",
    }
    return subprocess.run(
        [SH, str(script), *argv], env=env, capture_output=True, text=True, timeout=60, check=False
    )


def put(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_a_runner_nobody_answers_ends_the_job_with_the_drivers_code_and_says_so(tmp_path: Path) -> None:
    done = run_runner(tmp_path, "sh", "-c", "echo training; exit 3", wait_s=0)
    d = runner.runner_dir(tmp_path, "4242")
    assert done.returncode == 3
    assert "training" in done.stdout
    assert "no word from Shepherd within 0s: ending the job with the driver's code 3" in done.stdout
    report = runner.parse_exit((d / "exit-1").read_text())
    assert report is not None and (report.run, report.code) == (1, 3)
    assert (d / "ended").read_text().splitlines() == ["run=1", "code=3", "why=bound", "end"]


def test_a_runner_that_cannot_report_the_exit_ends_the_job_at_once(tmp_path: Path) -> None:
    """A full log filesystem: Shepherd would never see the exit, so no word can come; the job must not idle
    for the bound (here the report's temporary name is taken by a folder: the write fails, as on ENOSPC)."""
    d = runner.runner_dir(tmp_path, "4242")
    done = run_runner(tmp_path, "sh", "-c", f"mkdir {d}/exit-1.tmp; exit 3", wait_s=600)
    assert done.returncode == 3
    assert "cannot write" in done.stdout and "ending the job with the driver's code 3" in done.stdout
    assert not (d / "exit-1").exists()


def test_run_again_runs_shepherds_command_with_its_fix_inside_the_same_job(tmp_path: Path) -> None:
    d = runner.runner_dir(tmp_path, "4242")
    out = tmp_path / "second.txt"
    put(
        d / runner.script_name(2),
        runner.run_script(["sh", "-c", f'echo "$FIX" > {out}; exit 0'], {"FIX": "it's ok"}),
    )
    put(d / runner.word_name(1), runner.word_text("run", attempt=2))
    done = run_runner(tmp_path, "sh", "-c", "exit 1", wait_s=1)  # no word after run 2: the bound ends it
    assert done.returncode == 0  # the last driver run's code
    assert out.read_text() == "it's ok\n"
    assert "driver run 2 starting in place (attempt 2)" in done.stdout
    assert [runner.parse_exit((d / f"exit-{k}").read_text()) is not None for k in (1, 2)] == [True, True]


def test_a_word_that_comes_while_the_driver_still_runs_stops_it_first(tmp_path: Path) -> None:
    put(runner.runner_dir(tmp_path, "4242") / "word-1", runner.word_text("end", attempt=1))
    done = run_runner(tmp_path, "sh", "-c", "exec sleep 50", wait_s=30)  # a hang Shepherd decided on
    assert done.returncode == 143  # killed by the TERM
    assert "still runs: stopping it" in done.stdout


def test_end_the_job_exits_with_the_drivers_code(tmp_path: Path) -> None:
    put(runner.runner_dir(tmp_path, "4242") / "word-1", runner.word_text("end", attempt=1))
    done = run_runner(tmp_path, "sh", "-c", "exit 5", wait_s=30)
    assert done.returncode == 5
    assert "end the job (code 5)" in done.stdout


def test_a_half_written_word_is_never_trusted(tmp_path: Path) -> None:
    put(runner.runner_dir(tmp_path, "4242") / "word-1", "word=run\nattempt=2\n")  # no `end` yet
    done = run_runner(tmp_path, "sh", "-c", "exit 7", wait_s=0)
    assert done.returncode == 7
    assert "no word from Shepherd" in done.stdout


def test_run_again_without_a_complete_command_ends_the_job(tmp_path: Path) -> None:
    d = runner.runner_dir(tmp_path, "4242")
    put(d / runner.script_name(2), "#!/bin/sh\nexec true\n")  # no `# end`: incomplete
    put(d / runner.word_name(1), runner.word_text("run", attempt=2))
    done = run_runner(tmp_path, "sh", "-c", "exit 4", wait_s=30)
    assert done.returncode == 4
    assert "missing or incomplete" in done.stdout


def test_each_start_of_a_job_claims_a_folder_of_its_own_named_after_the_attempt(tmp_path: Path) -> None:
    from supervisor.act.inplace import job_runner_dir

    script = tmp_path / "runner.sh"
    script.write_text(runner.script_text())
    env = {
        "PATH": os.environ["PATH"],
        "BASE_LOG_DIR": str(tmp_path),
        "SHEPHERD_ATTEMPT": "3",
        runner.ENV_WAIT: "0",
    }
    for _ in range(2):  # a requeue starts the script again: its run 1 must not read the first start's words
        subprocess.run([SH, str(script), "true"], env=env, capture_output=True, timeout=60, check=True)
    key = runner.runner_key(3)
    assert (runner.runner_dir(tmp_path, key) / "exit-1").exists()
    assert (
        job_runner_dir(tmp_path, key) == runner.runner_dir(tmp_path, key, start=1) == tmp_path / "a3-1-runner"
    )
    assert job_runner_dir(tmp_path, runner.runner_key(4)) is None


def test_a_job_of_shepherds_names_its_folders_after_the_run_too_so_runs_can_share_a_log_dir(
    tmp_path: Path,
) -> None:
    from supervisor.act.inplace import job_runner_dir

    script = runner.script_path(tmp_path, "x")
    script.write_text(runner.script_text())
    for run_id in ("a-20261127-190000-abcd", "b-20261127-190000-abcd"):  # both at their attempt 1
        env = {"PATH": os.environ["PATH"], "BASE_LOG_DIR": str(tmp_path), "SHEPHERD_ATTEMPT": "1"}
        env |= {"SHEPHERD_RUN_ID": run_id, runner.ENV_WAIT: "0"}
        subprocess.run([SH, str(script), "true"], env=env, capture_output=True, timeout=60, check=True)
    for run_id in ("a-20261127-190000-abcd", "b-20261127-190000-abcd"):
        key = runner.attempt_key(run_id, 1, {"runner": True, runner.BY_RUN: True})
        assert job_runner_dir(tmp_path, key) == tmp_path / f"{run_id}-a1-runner"
        assert (tmp_path / f"{run_id}-a1-runner" / "exit-1").exists()
    assert job_runner_dir(tmp_path, "a-20261127-190000-abcd-a11") is None  # a1's folders are not a11's
    # A job submitted before the run id was part of the name keeps its `a<origin>` folders.
    assert runner.attempt_key("a-20261127-190000-abcd", 3, {"runner": True, "origin": 2}) == "a2"


def test_files_count_only_once_complete() -> None:
    assert runner.parse_exit("run=2\ncode=1\nat=1700000000\nend\n") == runner.DriverExit(2, 1, 1700000000.0)
    assert runner.parse_exit("run=2\ncode=1\n") is None
    assert runner.parse_word(runner.word_text("run", attempt=3, delay_s=12.4)) == ("run", 3)
    assert runner.parse_word("word=run\n") is None


def test_the_command_script_quotes_every_word_for_posix_sh() -> None:
    text = runner.run_script(
        ["python", "train.py", "a=$(rm -rf /)", "b c"], {"HF_HOME": "/x y", "BAD-NAME": "v"}
    )
    assert text.splitlines() == [
        "#!/bin/sh",
        "export HF_HOME='/x y'",
        "exec python train.py 'a=$(rm -rf /)' 'b c'",
        "# end",
    ]


@pytest.mark.parametrize("command", ["python t.py 'x=1'"])
def test_a_shell_command_is_run_under_the_runner_by_bash(command: str) -> None:
    wrapped = runner.wrap_shell(command, Path("/r/runner.sh"))
    assert wrapped == "sh /r/runner.sh bash -c 'python t.py '\"'\"'x=1'\"'\"''"


def test_a_step_shepherd_gives_runs_before_the_next_driver_run_and_is_reported(tmp_path: Path) -> None:
    d = runner.runner_dir(tmp_path, "4242")
    order = tmp_path / "order.txt"
    put(d / runner.pre_name(2), runner.run_script(["sh", "-c", f"echo drain >> {order}"], {}))
    put(d / runner.script_name(2), runner.run_script(["sh", "-c", f"echo run2 >> {order}"], {}))
    put(d / runner.word_name(1), runner.word_text("run", attempt=2))
    done = run_runner(tmp_path, "sh", "-c", "exit 1", wait_s=0)
    assert done.returncode == 0
    assert order.read_text().splitlines() == ["drain", "run2"]
    assert (d / "pre-2").read_text().splitlines() == ["run=2", "code=0", "end"]


def test_a_step_before_the_next_run_that_fails_ends_the_job_instead(tmp_path: Path) -> None:
    d = runner.runner_dir(tmp_path, "4242")
    ran = tmp_path / "run2.txt"
    put(d / runner.pre_name(2), runner.run_script(["sh", "-c", "exit 9"], {}))
    put(d / runner.script_name(2), runner.run_script(["sh", "-c", f"touch {ran}"], {}))
    put(d / runner.word_name(1), runner.word_text("run", attempt=2))
    done = run_runner(tmp_path, "sh", "-c", "exit 6", wait_s=30)
    assert done.returncode == 6  # the last driver run's code
    assert not ran.exists()
    assert "failed (code 9): ending the job" in done.stdout
    assert (d / "ended").read_text().splitlines() == ["run=1", "code=6", "why=pre-failed", "end"]


def test_an_incomplete_step_before_the_next_run_is_never_run(tmp_path: Path) -> None:
    d = runner.runner_dir(tmp_path, "4242")
    ran = tmp_path / "pre.txt"
    put(d / runner.pre_name(2), f"#!/bin/sh\ntouch {ran}\n")  # no `# end`
    put(d / runner.script_name(2), runner.run_script(["true"], {}))
    put(d / runner.word_name(1), runner.word_text("run", attempt=2))
    done = run_runner(tmp_path, "sh", "-c", "exit 2", wait_s=30)
    assert done.returncode == 2 and not ran.exists()
    assert (d / "ended").read_text().splitlines()[-2] == "why=no-command"


def test_shepherd_writes_the_step_and_the_command_before_its_word_and_drops_a_stale_step(
    tmp_path: Path,
) -> None:
    from supervisor.act.inplace import give_run

    d = tmp_path / "a1-runner"
    d.mkdir()
    give_run(d, 1, attempt=2, script=runner.run_script(["true"], {}), delay_s=0, pre="#!/bin/sh\n# end\n")
    assert {p.name for p in d.iterdir()} == {"run-2.sh", "pre-2.sh", "word-1"}
    (d / "word-1").unlink()  # (an interrupted try's leftovers, given again without a step)
    give_run(d, 1, attempt=2, script=runner.run_script(["true"], {}), delay_s=0)
    assert {p.name for p in d.iterdir()} == {"run-2.sh", "word-1"}


def test_the_drain_step_is_a_complete_posix_script_naming_the_node_and_never_stopping_ray() -> None:
    text = runner.drain_script("node-2", "shepherd: cuda-hardware-error on node-2")
    assert runner.complete_lines(text, runner.SCRIPT_END) is not None
    assert "node=node-2" in text and "drain-node" in text and "DRAIN_NODE_REASON_PREEMPTION" in text
    assert "ray stop" not in text
    done = subprocess.run([SH, "-n"], input=text, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
