"""Slack's `/resume RUN [CKPT] set KEY=VALUE ...`: the same changes as the CLI's `--set`, parsed to data."""

from __future__ import annotations

import pytest

from supervisor.notify.slack import commands as c


@pytest.mark.parametrize(
    ("command", "text", "expected"),
    [
        (
            "/resume",
            "gsm8k-a set command+=policy.train_micro_batch_size=1",
            c.Resume("gsm8k-a", "latest", ("command+=policy.train_micro_batch_size=1",)),
        ),
        (
            "/resume",
            "gsm8k-a step_4 SET slurm.time=02:00:00 resume.max_attempts=6",
            c.Resume("gsm8k-a", "step_4", ("slurm.time=02:00:00", "resume.max_attempts=6")),
        ),
        (
            "/shepherd",
            "resume gsm8k-a set command-=grpo.max_num_steps",
            c.Resume("gsm8k-a", "latest", ("command-=grpo.max_num_steps",)),
        ),
    ],
)
def test_a_resume_with_changes_parses_to_them(command: str, text: str, expected: c.Command) -> None:
    assert c.parse_slash(command, text) == expected


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("gsm8k-a set", "usage"),
        ("gsm8k-a best extra set a=1", "usage"),
        ("gsm8k-a set slurm.time", "one KEY=VALUE"),
        ("gsm8k-a set $(id)=1", "one KEY=VALUE"),
    ],
)
def test_a_malformed_change_is_refused_before_anything_acts(text: str, says: str) -> None:
    parsed = c.parse_slash("/resume", text)
    assert isinstance(parsed, c.ParseError) and says in parsed.message
