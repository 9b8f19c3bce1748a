"""`shepherd --version` says which Shepherd is installed: the version of the project's metadata."""

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from supervisor.cli.main import main

REPO = Path(__file__).resolve().parents[2]


def project_version() -> str:
    return str(tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"])


def test_version_prints_the_projects_version_and_exits_zero(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out == f"shepherd {project_version()}\n"


def test_the_command_line_prints_it_too_with_no_subcommand() -> None:
    res = subprocess.run(
        [sys.executable, "-m", "supervisor.cli", "--version"], capture_output=True, text=True, cwd=REPO
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == f"shepherd {project_version()}"
