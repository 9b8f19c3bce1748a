"""Logs: JSON with syslog priorities under journald, pretty on a tty, never a secret or a local variable."""

from __future__ import annotations

import io
import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

import pytest
import structlog

from supervisor.logs import configure_logging, resolve_mode


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    structlog.reset_defaults()
    for h in list(root.handlers):
        root.removeHandler(h)
    for h in handlers:
        root.addHandler(h)
    root.setLevel(level)


def _journal_env(stream: TextIO) -> dict[str, str]:
    st = os.fstat(stream.fileno())
    return {"JOURNAL_STREAM": f"{st.st_dev}:{st.st_ino}"}


def _lines(path: Path) -> list[str]:
    return [line for line in path.read_text().splitlines() if line]


def test_under_journald_each_event_is_json_with_a_syslog_priority_prefix(tmp_path: Path) -> None:
    out = tmp_path / "stderr"
    with out.open("w") as stream:
        mode = configure_logging("auto", "debug", stream=stream, env=_journal_env(stream))
        log = structlog.get_logger("supervisor.test")
        log.debug("d")
        log.info("started", runs=3)
        log.warning("slurm slow")
        log.error("submit failed", spec="a.yaml")
        log.critical("store corrupt")
    assert mode == "journal"
    lines = _lines(out)
    assert [line[:3] for line in lines] == ["<7>", "<6>", "<4>", "<3>", "<2>"]
    started = json.loads(lines[1][3:])
    assert started["event"] == "started"
    assert started["runs"] == 3
    assert started["level"] == "info"
    assert started["logger"] == "supervisor.test"


def test_journal_stream_of_another_file_means_plain_json(tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.write_text("")
    with other.open() as o, (tmp_path / "stderr").open("w") as stream:
        assert resolve_mode("auto", stream, _journal_env(o)) == "json"
        assert resolve_mode("auto", stream, {}) == "json"


def test_a_terminal_gets_the_pretty_console_renderer() -> None:
    class FakeTty(io.StringIO):
        def isatty(self) -> bool:
            return True

    stream = FakeTty()
    assert configure_logging("auto", "info", stream=stream, env={}) == "pretty"
    structlog.get_logger("supervisor.test").info("run resumed", run="grpo-7")
    text = stream.getvalue()
    assert "run resumed" in text
    assert "run" in text and "grpo-7" in text
    assert not text.lstrip().startswith("{")


def test_secrets_are_masked_in_messages_fields_and_nested_values() -> None:
    stream = io.StringIO()
    configure_logging("json", "info", stream=stream)
    structlog.get_logger("supervisor.test").info(
        "posting with xoxb-1111-2222-abcdefabcdef",
        slack_token="plain-looking-value",
        password=12345678,
        url="https://bob:hunter22@nas/x",
        env={"HF_TOKEN": "whatever", "PATH": "/bin"},
        argv=["python", "train.py", "--api-key", "k-abcdef"],
    )
    text = stream.getvalue()
    for secret in ("abcdefabcdef", "plain-looking-value", "12345678", "hunter22", "whatever", "k-abcdef"):
        assert secret not in text
    event = json.loads(text)
    assert event["env"] == {"HF_TOKEN": "***", "PATH": "/bin"}
    assert event["url"] == "https://bob:***@nas/x"


def test_tracebacks_have_no_local_variables_and_are_redacted() -> None:
    stream = io.StringIO()
    configure_logging("json", "info", stream=stream)

    def connect() -> None:
        bot_token_in_a_local = "hunter2-local-only-value"
        raise ConnectionError(f"auth failed for xoxb-3333-abcdefghijkl ({len(bot_token_in_a_local)})")

    try:
        connect()
    except ConnectionError:
        structlog.get_logger("supervisor.test").exception("slack connect failed")
    event = json.loads(stream.getvalue())
    assert "ConnectionError" in event["exception"]
    assert "hunter2-local-only-value" not in stream.getvalue()  # locals are never rendered
    assert "abcdefghijkl" not in stream.getvalue()


def test_pretty_tracebacks_have_no_locals_either() -> None:
    stream = io.StringIO()
    configure_logging("pretty", "info", stream=stream)

    def fail() -> None:
        secret_local = "pretty-local-secret-value"
        raise ValueError(secret_local[:3])

    try:
        fail()
    except ValueError:
        structlog.get_logger("supervisor.test").exception("boom")
    assert "ValueError" in stream.getvalue()
    assert "pretty-local-secret-value" not in stream.getvalue()


def test_third_party_stdlib_logs_go_through_the_same_renderer_at_warning_and_up(tmp_path: Path) -> None:
    out = tmp_path / "stderr"
    with out.open("w") as stream:
        configure_logging("auto", "debug", stream=stream, env=_journal_env(stream))
        slack = logging.getLogger("slack_sdk.socket_mode")
        slack.info("every http call: noise")
        slack.warning("rate limited, token %s", "xoxb-4444-abcdefghijkl")
        logging.getLogger("aiohttp.client").error("connection reset")
    lines = _lines(out)
    assert len(lines) == 2
    assert lines[0].startswith("<4>")
    warning = json.loads(lines[0][3:])
    assert warning["logger"] == "slack_sdk.socket_mode"
    assert warning["event"] == "rate limited, token xoxb-***"
    assert lines[1].startswith("<3>")


def test_level_filters_structlog_events() -> None:
    stream = io.StringIO()
    configure_logging("json", "warning", stream=stream)
    log = structlog.get_logger("supervisor.test")
    log.info("hidden")
    log.warning("shown")
    assert [json.loads(x)["event"] for x in stream.getvalue().splitlines()] == ["shown"]


def test_unknown_level_is_rejected() -> None:
    with pytest.raises(ValueError):
        configure_logging("json", "loud", stream=io.StringIO())
