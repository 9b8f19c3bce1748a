"""Every `shepherd` verb behaves in a pipe: a reader that goes away (`| head`) ends it quietly."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from supervisor.store import Store

RUN = "toy-20261121-000000-abcd"


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("root")
    store = Store(root / "state" / "shepherd.sqlite3")
    store.create_run(RUN, "toy", '{"name": "toy", "command": ["echo"]}', "/x")
    store.create_run("other-20261121-000000-abcd", "other", '{"name": "other", "command": ["echo"]}', "/x")
    store.close()
    return root


def shepherd_into_a_closed_pipe(root: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """Runs `shepherd ARGV` with stdout a pipe nobody reads any more (what `| head` leaves behind)."""
    r, w = os.pipe()
    os.close(r)
    try:
        return subprocess.run(
            [sys.executable, "-m", "supervisor.cli", "--root", str(root), *argv],
            stdout=w,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    finally:
        os.close(w)


@pytest.mark.parametrize(
    "argv",
    [("status",), ("status", "--json"), ("status", RUN), ("rules", "check"), ("--help",), ("logs", "--help")],
    ids=" ".join,
)
def test_a_verb_whose_reader_went_away_ends_quietly(root: Path, argv: tuple[str, ...]) -> None:
    proc = shepherd_into_a_closed_pipe(root, *argv)
    assert "Traceback" not in proc.stderr and "BrokenPipeError" not in proc.stderr, proc.stderr
    assert proc.returncode in (0, 141)  # 141: as a shell reports a command ended by SIGPIPE; argparse's own
    # help printer ignores the error and exits 0
