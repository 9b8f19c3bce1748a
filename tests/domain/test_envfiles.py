"""Secret files: KEY=VALUE lines, used only when private to their owner, errors located and never quoting a
value; a spec names them (env_files) or names variables of the submitting shell (pass_env)."""

from __future__ import annotations

from pathlib import Path

import pytest

from supervisor.domain.envfiles import (
    EnvFileError,
    parse_env_text,
    read_private_env_file,
    read_secret_env,
    write_private_env_file,
)
from supervisor.domain.spec import JobSpec, check_spec_files
from supervisor.domain.yamlpos import YamlDocumentError


def private(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(0o600)
    return path


def test_lines_comments_export_and_quotes() -> None:
    text = "# W&B\nexport WANDB_API_KEY=abc123def\n\nHF_TOKEN = 'hf_x y'\nQ=\"it's\"\nEMPTY=\n"
    assert parse_env_text(text, "f") == {
        "WANDB_API_KEY": "abc123def",
        "HF_TOKEN": "hf_x y",
        "Q": "it's",
        "EMPTY": "",
    }


def test_a_bad_line_is_located_without_its_value() -> None:
    with pytest.raises(EnvFileError, match=r"^wandb.env:2: expected KEY=VALUE$"):
        parse_env_text("A=1\nsupersecretvalue\n", "wandb.env")
    with pytest.raises(EnvFileError, match=r"wandb.env:1: '1BAD' is not a valid"):
        parse_env_text("1BAD=x\n", "wandb.env")


def test_a_file_others_can_read_is_refused_with_the_fix(tmp_path: Path) -> None:
    f = private(tmp_path / "wandb.env", "WANDB_API_KEY=abc123def\n")
    assert read_private_env_file(f) == {"WANDB_API_KEY": "abc123def"}
    f.chmod(0o640)
    with pytest.raises(
        EnvFileError, match=r"readable or writable by group or others \(mode 640\).*chmod 600"
    ):
        read_private_env_file(f)


def test_a_symlink_or_a_missing_file_is_refused(tmp_path: Path) -> None:
    f = private(tmp_path / "wandb.env", "K=v\n")
    (tmp_path / "link.env").symlink_to(f)
    with pytest.raises(EnvFileError, match="symbolic link"):
        read_private_env_file(tmp_path / "link.env")
    with pytest.raises(EnvFileError, match="does not exist"):
        read_private_env_file(tmp_path / "nope.env")


def test_written_values_come_back_exactly_and_the_file_is_private(tmp_path: Path) -> None:
    env = {"A": "plain", "B": "it's", "C": " spaced ", "D": "'quoted'", "E": ""}
    write_private_env_file(tmp_path / "kept.env", env)
    assert (tmp_path / "kept.env").stat().st_mode & 0o777 == 0o600
    assert read_private_env_file(tmp_path / "kept.env") == env


def test_a_runs_secrets_are_its_env_files_then_its_kept_pass_env(tmp_path: Path) -> None:
    f = private(tmp_path / "wandb.env", "WANDB_API_KEY=from-file\nWANDB_ENTITY=team\n")
    kept = tmp_path / "pass_env.env"
    write_private_env_file(kept, {"HF_TOKEN": "hf_passed"})
    assert read_secret_env([f], ["HF_TOKEN"], kept) == {
        "WANDB_API_KEY": "from-file",
        "WANDB_ENTITY": "team",
        "HF_TOKEN": "hf_passed",
    }
    with pytest.raises(EnvFileError, match=r"pass_env.env: holds no OTHER \(pass_env\)"):
        read_secret_env([], ["OTHER"], kept)


def test_the_spec_names_secrets_never_their_values(tmp_path: Path) -> None:
    spec = JobSpec.model_validate(
        {
            "name": "t",
            "command": "env",
            "env_files": ["~/.config/shepherd/wandb.env"],
            "pass_env": ["HF_TOKEN"],
        }
    )
    assert spec.pass_env == ["HF_TOKEN"] and str(spec.env_files[0]).startswith("~")
    for bad, why in (
        ({"env_files": ["wandb.env"]}, "absolute path"),
        ({"pass_env": ["HF-TOKEN"]}, "not a valid environment variable name"),
        ({"pass_env": ["A", "A"]}, "listed twice"),
        ({"pass_env": ["A"], "env": {"A": "x"}}, "both env and pass_env"),
    ):
        with pytest.raises(ValueError, match=why):
            JobSpec.model_validate({"name": "t", "command": "env", **bad})


def test_a_spec_whose_env_file_is_not_private_is_refused_at_submission(tmp_path: Path) -> None:
    f = private(tmp_path / "wandb.env", "WANDB_API_KEY=abc\n")
    spec = JobSpec.model_validate({"name": "t", "command": "env", "env_files": [str(f)]})
    assert check_spec_files(spec) == []
    f.chmod(0o644)
    [problem] = check_spec_files(spec)
    assert problem.startswith(f"env_files: {f}: readable or writable by group or others")


def test_yaml_errors_for_the_new_fields_are_located(tmp_path: Path) -> None:
    from supervisor.domain.spec import load_spec

    with pytest.raises(YamlDocumentError, match=r"spec.yaml:3"):
        load_spec(tmp_path / "spec.yaml", "name: t\ncommand: env\npass_env: [BAD-NAME]\n")
