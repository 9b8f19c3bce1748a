"""Slurm's ExitCode `status:signal` in words: a job killed by a signal never reads as "exit 0"."""

from __future__ import annotations

import pytest

from supervisor.domain.jobstate import describe_exit


@pytest.mark.parametrize(
    ("code", "signal", "words"),
    [
        (0, 0, "exit 0"),
        (3, 0, "exit 3"),
        (0, 9, "signal 9 (SIGKILL)"),
        (0, 125, "signal 125"),  # Slurm's mark of an OOM kill: no signal of that number
        (1, 15, "exit 1, signal 15 (SIGTERM)"),
        (0, None, "exit 0"),
        (None, None, ""),
    ],
)
def test_exit_codes_and_signals_in_words(code: int | None, signal: int | None, words: str) -> None:
    assert describe_exit(code, signal) == words
