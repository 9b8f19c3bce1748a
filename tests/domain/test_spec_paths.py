"""A spec states each path once, relative paths start in the spec's folder, and a resume point the trainer
cannot be made to load is refused (issue #30: resume points are true)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
import yaml

from supervisor.domain.overrides import AttemptOverrides
from supervisor.domain.spec import JobSpec, command_value, load_spec, spec_yaml
from supervisor.domain.yamlpos import YamlDocumentError
from supervisor.slurm.command import driver_command

NEMO = (
    "launcher: {kind: nemo-rl, script: ray.sub}\n"
    "container: {image: img, mounts: ['/s:/s']}\n"
    "slurm: {account: a, partition: p}\n"
)


def write(folder: Path, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "run.yaml"
    path.write_text(text)
    return path


def submitted(path: Path, cwd: Path | None = None) -> JobSpec:
    """As `shepherd submit` reads it: relative paths start in the spec's folder."""
    return load_spec(path, base=path.parent, cwd=cwd)


def errors(path: Path, **kw: Path) -> str:
    with pytest.raises(YamlDocumentError) as exc:
        load_spec(path, **kw)
    return str(exc.value)


def test_relative_paths_start_in_the_spec_files_folder_and_are_kept_absolute(tmp_path: Path) -> None:
    folder = tmp_path / "exp"
    spec = submitted(
        write(
            folder,
            "name: r\ncommand: [python, train.py]\nworkdir: /work\n" + NEMO
            + "rules: {files: [rules/mine.yaml]}\ncheckpoint: {dir: ckpt}\nlog_dir: ../logs\n"
            "trainer_log_dir: tb\nenv_files: [secrets/w.env, ~/x.env]\nshared_cache_dir: cache\n"
            "model_dir: /models/m\n",
        )
    )  # fmt: skip
    assert spec.launcher.script == folder / "ray.sub"
    assert spec.rules.files == [folder / "rules" / "mine.yaml"]
    assert spec.checkpoint is not None and spec.checkpoint.dir == folder / "ckpt"
    assert spec.log_dir == tmp_path / "logs" and spec.trainer_log_dir == folder / "tb"
    assert spec.env_files == [folder / "secrets" / "w.env", Path("~/x.env")]  # ~ is the user's, as before
    assert spec.shared_cache_dir == folder / "cache" and spec.model_dir == Path("/models/m")
    assert spec.workdir == Path("/work")  # never moved: it is the job's folder


def test_a_spec_dropped_into_the_queue_resolves_against_its_workdir_or_is_refused(tmp_path: Path) -> None:
    path = write(
        tmp_path / "queue", "name: r\ncommand: x\nworkdir: /shared/me/rl\nrules: {files: [r.yaml]}\n"
    )
    assert load_spec(path).rules.files == [Path("/shared/me/rl/r.yaml")]
    path.write_text("name: r\ncommand: x\ncheckpoint: {dir: ckpt}\n")
    assert "run.yaml:1: <document>: Value error, checkpoint.dir must be an absolute path" in errors(path)


def test_checkpoint_dir_and_trainer_log_dir_default_to_the_commands_own(tmp_path: Path) -> None:
    command = "uv run run_grpo.py checkpointing.checkpoint_dir=results/grpo logger.log_dir=/shared/logs"
    spec = submitted(
        write(tmp_path, f"name: r\ncommand: {json.dumps(command)}\nworkdir: /shared/RL\ncheckpoint: {{}}\n")
    )
    assert spec.checkpoint is not None and spec.checkpoint.dir == Path("/shared/RL/results/grpo")
    assert spec.trainer_log_dir == Path("/shared/logs")


def test_the_commands_relative_path_starts_where_the_job_runs_submit_s_folder_without_workdir(
    tmp_path: Path,
) -> None:
    path = write(
        tmp_path / "spec", "name: r\ncommand: [t, checkpointing.checkpoint_dir=ck]\ncheckpoint: {}\n"
    )
    spec = submitted(path, cwd=tmp_path / "here")
    assert spec.checkpoint is not None and spec.checkpoint.dir == tmp_path / "here" / "ck"


def test_a_path_stated_twice_differently_is_a_located_error(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "name: r\ncommand: 'python t.py checkpointing.checkpoint_dir=/shared/reslts logger.log_dir=/l'\n"
        "checkpoint: {dir: /shared/results}\ntrainer_log_dir: /logs\n",
    )
    text = errors(path, base=tmp_path)
    assert (
        "run.yaml:3: checkpoint: Value error, checkpoint.dir is /shared/results but the command says "
        "checkpointing.checkpoint_dir=/shared/reslts" in text
    )
    assert "run.yaml:4: trainer_log_dir: Value error, trainer_log_dir is /logs but the command says" in text


def test_the_same_path_written_both_ways_or_left_to_the_job_is_accepted(tmp_path: Path) -> None:
    command = "t checkpointing.checkpoint_dir=/s/ck/ checkpointing.checkpoint_dir=$SHEPHERD_CHECKPOINT_DIR"
    path = write(tmp_path, f"name: r\ncommand: {json.dumps(command)}\ncheckpoint: {{dir: /elsewhere}}\n")
    assert submitted(path).checkpoint is not None  # the last one wins and only the job knows its value
    path.write_text("name: r\ncommand: [t, checkpointing.checkpoint_dir=/s/ck/]\ncheckpoint: {dir: /s/ck}\n")
    assert submitted(path).checkpoint is not None


def test_a_stored_spec_is_read_back_without_the_submission_checks() -> None:
    """Runs recorded before the checks existed still load."""
    data = {"name": "r", "command": ["t", "logger.log_dir=/a"], "trainer_log_dir": "/b"}
    assert JobSpec.model_validate(data).trainer_log_dir == Path("/b")


def test_command_value_reads_argv_and_shell_strings() -> None:
    key = "checkpointing.checkpoint_dir="
    assert command_value(["t", f"{key}/a", f"{key}/b"], key) == "/b"
    assert command_value(f"t '{key}/my dir'", key) == "/my dir"
    assert command_value("t 'unclosed", key) is None and command_value(f"t {key}$X", key) is None


def test_nemo_rl_is_pointed_at_a_staged_dir_without_checkpoint_dir_arg(tmp_path: Path) -> None:
    spec = submitted(
        write(tmp_path, f"name: r\ncommand: 'uv run g.py checkpointing.checkpoint_dir=/s/ck x=1'\n{NEMO}")
    )
    staged = "/s/ck.staged/r/attempt-2"
    cmd = driver_command(spec, AttemptOverrides(checkpoint=f"{staged}/step_2", checkpoint_dir=staged))
    assert isinstance(cmd, str) and shlex.split(cmd)[:5] == [
        "uv", "run", "g.py", f"checkpointing.checkpoint_dir={staged}", "x=1",
    ]  # fmt: skip
    assert spec.cannot_pick_checkpoint is None


def test_a_trainer_shepherd_cannot_point_elsewhere_refuses_a_pinned_resume_point(tmp_path: Path) -> None:
    path = write(tmp_path, "name: r\ncommand: [t]\ncheckpoint: {dir: /c}\nresume: {checkpoint: best}\n")
    assert (
        "run.yaml:4: resume: Value error, resume.checkpoint best: this trainer resumes from the newest step"
        in errors(path)
    )
    for fix in ("pass_checkpoint: ['--from', '{checkpoint}']", "checkpoint_dir_arg: ['d={checkpoint_dir}']"):
        path.write_text(
            f"name: r\ncommand: [t]\ncheckpoint: {{dir: /c}}\nresume: {{checkpoint: best, {fix}}}\n"
        )
        assert load_spec(path).resume.checkpoint == "best"
    path.write_text("name: r\ncommand: 't --dir=$SHEPHERD_CHECKPOINT_DIR'\nresume: {checkpoint: best}\n")
    assert load_spec(path).cannot_pick_checkpoint is None


def test_the_queued_copy_reads_back_as_the_same_spec_from_any_folder(tmp_path: Path) -> None:
    path = write(
        tmp_path / "exp",
        "# my run\nname: r\ncommand: [t, 'checkpointing.checkpoint_dir=/s/ck', 'logger.log_dir=/s/l']\n"
        "slurm: {time: '04:00:00'}\ncheckpoint: {metric: 'val:accuracy'}\nrules: {files: [r.yaml]}\n",
    )
    spec = submitted(path, cwd=tmp_path)
    queued = write(tmp_path / "queue", spec_yaml(spec, path))
    again = load_spec(queued)
    assert again == spec and again.rules.files == [tmp_path / "exp" / "r.yaml"]
    assert yaml.safe_load(queued.read_text())["slurm"] == {"time": "04:00:00"}
