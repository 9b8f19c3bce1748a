"""The decisive line of a long log is found in its tail, numbered as the file numbers it."""

from __future__ import annotations

from pathlib import Path

from supervisor.act.decisive import TAIL_BYTES, read_tail
from supervisor.rules.decisive import decisive_line


def test_a_long_logs_tail_keeps_the_files_line_numbers(tmp_path: Path) -> None:
    log = tmp_path / "ray-driver.log"
    filler = "INFO step 1: loss=0.5 " + "x" * 80 + "\n"
    n = (3 * TAIL_BYTES) // len(filler)
    log.write_text(
        filler * n + 'Traceback (most recent call last):\n  File "a.py", line 1\nOSError: disk full\n'
    )
    tail = read_tail(log)
    assert tail is not None and len(tail[0]) <= TAIL_BYTES
    d = decisive_line(tail[0], log.name, first_line=tail[1])
    assert d is not None and (d.line, d.text) == (n + 3, "OSError: disk full")


def test_an_unreadable_log_has_no_tail(tmp_path: Path) -> None:
    assert read_tail(tmp_path / "missing.log") is None
