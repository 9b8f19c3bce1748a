"""The trainer's command line takes overrides on either side of `--resume-from`, as launchers append them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

from trainer.__main__ import main


@pytest.fixture(autouse=True)
def structlog_as_it_was() -> Iterator[None]:
    """main() points structlog at this test's captured stderr, closed afterwards: no later test logs there."""
    saved = structlog.get_config()
    yield
    structlog.configure(**saved)


def test_an_override_after_resume_from_is_read_not_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A bad value placed after --resume-from: the config error proves the override reached the config loader
    # (argparse used to stop earlier with "unrecognized arguments", exit 2 as well, hence the message check).
    late = "checkpointing.checkpoint_must_save_by=soon"
    argv = ["grpo.max_num_steps=5", "--resume-from", str(tmp_path), late]
    rc = main(argv)
    err = capsys.readouterr().err
    assert rc == 2
    assert "unrecognized arguments" not in err
    assert "checkpoint_must_save_by" in err
