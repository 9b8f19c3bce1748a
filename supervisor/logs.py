"""Logging for a daemon that runs for months under journald: one JSON line per event, no secrets.

- Under journald (stderr is the stream named by $JOURNAL_STREAM) each line is
  JSON prefixed with ``<N>``, the syslog priority, so `journalctl -p warning`
  filters properly while the payload stays machine-readable.
- On a terminal: structlog's ConsoleRenderer, for humans.
- Anywhere else (files, pipes, CI): plain JSON lines.

Secrets: every string in every event (message, fields, nested values,
tracebacks) goes through `redact()`, and values of secret-named keys are
masked whatever they are. Tracebacks are rendered with the stdlib
`traceback` module (no local variables: rich's ``show_locals`` would print
a Slack token sitting in a frame). Third-party stdlib loggers (slack_sdk,
aiohttp, watchfiles) go through the same processors at WARNING and above.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping
from typing import Any, Literal, TextIO

import structlog
from structlog.typing import EventDict, Processor, WrappedLogger

from supervisor.redact import MASK, is_secret_key, redact, redact_argv

LogMode = Literal["auto", "json", "pretty", "journal"]

# syslog priorities (RFC 5424) by structlog level name
SYSLOG_PRIORITY = {
    "critical": 2,
    "exception": 3,
    "error": 3,
    "warning": 4,
    "warn": 4,
    "notice": 5,
    "info": 6,
    "debug": 7,
}

# Third-party libraries are chatty at INFO (every Slack HTTP call); only their problems matter here.
FOREIGN_LEVEL = logging.WARNING

_MAX_DEPTH = 6


def _redact_value(key: str | None, value: Any, depth: int = 0) -> Any:
    if key is not None and is_secret_key(key) and value not in (None, "", b""):
        return MASK
    if isinstance(value, str):
        return redact(value)
    if depth >= _MAX_DEPTH:
        return value
    if isinstance(value, Mapping):
        return {k: _redact_value(str(k), v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return redact_argv(value)  # an argv: "--token", "x" masks the x
    if isinstance(value, list | tuple | set | frozenset):
        return [_redact_value(None, v, depth + 1) for v in value]
    return value


def redact_processor(_logger: WrappedLogger, _method: str, event_dict: EventDict) -> EventDict:
    """structlog processor: mask secret-named fields and redact every string, recursively."""
    for key in list(event_dict):
        if key.startswith("_"):  # structlog internals (_record, _from_structlog)
            continue
        value = event_dict[key]
        if key == "event":
            event_dict[key] = redact(value) if isinstance(value, str) else _redact_value(None, value)
        else:
            event_dict[key] = _redact_value(key, value)
    return event_dict


class JournaldRenderer:
    """JSON with a ``<N>`` syslog-priority prefix, which journald strips and stores as PRIORITY."""

    def __init__(self) -> None:
        self._json = structlog.processors.JSONRenderer(sort_keys=False, default=str)

    def __call__(self, logger: WrappedLogger, method: str, event_dict: EventDict) -> str:
        level = str(event_dict.get("level", method)).lower()
        prio = SYSLOG_PRIORITY.get(level, 6)
        rendered = self._json(logger, method, event_dict)
        if isinstance(rendered, bytes):
            rendered = rendered.decode()
        return f"<{prio}>{rendered}"


def _is_journal_stream(stream: TextIO, env: Mapping[str, str]) -> bool:
    """systemd sets JOURNAL_STREAM=dev:inode of the stream it connected; compare so redirects don't lie."""
    raw = env.get("JOURNAL_STREAM", "")
    if not raw:
        return False
    try:
        dev_s, ino_s = raw.split(":", 1)
        st = os.fstat(stream.fileno())
        return st.st_dev == int(dev_s) and st.st_ino == int(ino_s)
    except (ValueError, OSError, AttributeError):
        return False


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (ValueError, AttributeError):
        return False


def resolve_mode(mode: LogMode, stream: TextIO, env: Mapping[str, str] | None = None) -> LogMode:
    """What 'auto' means here: journal if systemd connected this stream, pretty on a tty, else JSON."""
    if mode != "auto":
        return mode
    env = os.environ if env is None else env
    if _is_journal_stream(stream, env):
        return "journal"
    if _isatty(stream):
        return "pretty"
    return "json"


def _level_number(level: int | str) -> int:
    if isinstance(level, int):
        return level
    number = logging.getLevelName(level.upper())
    if not isinstance(number, int):
        raise ValueError(f"unknown log level {level!r}")
    return number


class _NamedWriteLogger(structlog.WriteLogger):
    """A WriteLogger that remembers the name given to get_logger(__name__), for add_logger_name."""

    def __init__(self, file: TextIO, name: str) -> None:
        super().__init__(file)
        self.name = name


class _NamedWriteLoggerFactory:
    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def __call__(self, *args: Any) -> _NamedWriteLogger:
        name = str(args[0]) if args and args[0] is not None else ""
        return _NamedWriteLogger(self._stream, name)


def _add_logger_name(logger: WrappedLogger, _method: str, event_dict: EventDict) -> EventDict:
    record = event_dict.get("_record")
    name = record.name if record is not None else getattr(logger, "name", "")
    if name:
        event_dict.setdefault("logger", name)
    return event_dict


def configure_logging(
    mode: LogMode = "auto",
    level: int | str = "info",
    *,
    stream: TextIO | None = None,
    env: Mapping[str, str] | None = None,
) -> LogMode:
    """Set up structlog and route stdlib logging through it; returns the mode actually used.

    Safe to call again (tests, or a SIGHUP that changes the level): it replaces the previous setup.
    """
    stream = sys.stderr if stream is None else stream
    resolved = resolve_mode(mode, stream, env)
    level_no = _level_number(level)

    renderer: Processor
    if resolved == "journal":
        renderer = JournaldRenderer()
    elif resolved == "pretty":
        renderer = structlog.dev.ConsoleRenderer(
            colors=_isatty(stream), exception_formatter=structlog.dev.plain_traceback
        )
    else:
        renderer = structlog.processors.JSONRenderer(default=str)

    shared: list[Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        _add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.StackInfoRenderer(),
    ]
    # Exceptions become plain text (stdlib traceback: no locals) *before* redaction sees them.
    tail: list[Processor] = [structlog.processors.format_exc_info, redact_processor, renderer]

    structlog.configure(
        processors=[*shared, *tail],
        wrapper_class=structlog.make_filtering_bound_logger(level_no),
        logger_factory=_NamedWriteLoggerFactory(stream),
        context_class=dict,
        cache_logger_on_first_use=False,
    )

    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=shared,
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *tail],
    )
    handler = logging.StreamHandler(stream)
    handler.setFormatter(formatter)
    handler.set_name("shepherd")
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(max(FOREIGN_LEVEL, level_no))
    logging.captureWarnings(True)
    return resolved
