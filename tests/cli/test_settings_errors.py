"""Bad settings stop every command with one clear, located message and exit status 2, never a traceback:
whatever the verb, and whether the problem is in shepherd.toml or in a SHEPHERD_* variable."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from supervisor.cli.main import build_parser, main

# Every verb that reads the settings, with arguments it accepts (`rules` reads only the files it is given).
VERBS: dict[str, list[str]] = {
    "daemon": [],
    "service": ["install"],
    "submit": ["spec.yaml"],
    "status": [],
    "logs": ["toy"],
    "history": ["toy"],
    "checkpoints": ["toy"],
    "cancel": ["toy"],
    "hold": ["toy"],
    "release": ["toy"],
    "give-up": ["toy"],
    "resume": ["toy"],
    "adopt": ["--spec", "spec.yaml", "123"],
    "silence": ["toy", "2h"],
    "plot": ["toy", "-o", "x.png"],
    "report": [],
    "watch": [],
    "doctor": [],
}
NOT_READING_SETTINGS = {"rules", "completion"}
BAD_TOML = '[slurm]\npoll_interval_s = "soon"\n\n[preflight]\nshared_path = ["/"]\n'


@pytest.fixture(autouse=True)
def no_shepherd_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.upper().startswith("SHEPHERD_"):
            monkeypatch.delenv(name)


def test_every_verb_is_covered() -> None:
    parser = build_parser()
    [sub] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert set(sub.choices) == set(VERBS) | NOT_READING_SETTINGS


@pytest.mark.parametrize("verb", sorted(VERBS))
def test_a_bad_file_stops_the_verb_with_every_problem_located(
    verb: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "spec.yaml").write_text("name: toy\ncommand: [echo]\n")
    (tmp_path / "shepherd.toml").write_text(BAD_TOML)

    assert main(["--root", str(tmp_path), verb, *VERBS[verb]]) == 2

    out = capsys.readouterr()
    assert out.err.splitlines() == [
        "shepherd: invalid settings, nothing done:",
        f"{tmp_path}/shepherd.toml:2: slurm.poll_interval_s: should be a valid number, "
        "unable to parse string as a number",
        f"{tmp_path}/shepherd.toml:5: preflight.shared_path: unknown key (not allowed here); "
        "did you mean `shared_paths`?",
    ]
    assert out.out == ""
    assert not list(tmp_path.glob("queue/*.yaml"))  # submit queued nothing


@pytest.mark.parametrize(
    ("verb", "env", "expected"),
    [
        (
            "status",
            {"SHEPHERD_LEASE__TTL_S": "soon"},
            "$SHEPHERD_LEASE__TTL_S: lease.ttl_s: should be a valid number",
        ),
        (
            "daemon",
            {"SHEPHERD_PREFLIGHT__SHARED_PATHS": "/"},
            "$SHEPHERD_PREFLIGHT__SHARED_PATHS: preflight.shared_paths: not valid JSON",
        ),
        ("submit", {}, "shepherd.toml:2: invalid TOML: Invalid value (column 19)"),
        ("doctor", {"SHEPHERD_SLURM__POLL": "1"}, "$SHEPHERD_SLURM__POLL: slurm.poll: unknown key"),
    ],
)
def test_the_command_says_it_without_a_traceback(
    tmp_path: Path, verb: str, env: dict[str, str], expected: str
) -> None:
    """As a user runs it: a process of its own, the problem on stderr, exit status 2."""
    (tmp_path / "spec.yaml").write_text("name: toy\ncommand: [echo]\n")
    if not env:
        (tmp_path / "shepherd.toml").write_text("[slurm]\npoll_interval_s = \n")
    clean = {k: v for k, v in os.environ.items() if not k.upper().startswith("SHEPHERD_")}
    proc = subprocess.run(
        [sys.executable, "-m", "supervisor.cli", "--root", str(tmp_path), verb, *VERBS[verb]],
        env={**clean, **env},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.startswith("shepherd: invalid settings, nothing done:\n")
    assert expected in proc.stderr
