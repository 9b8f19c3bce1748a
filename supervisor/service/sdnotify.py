"""The sd_notify protocol, implemented directly (one datagram to $NOTIFY_SOCKET).

Written here rather than taken from `sdnotify` (swallows errors silently) or
`systemd-python` (needs libsystemd headers to build). A failed notification is
logged and dropped: the daemon must never crash because systemd is not
listening, and outside systemd (NOTIFY_SOCKET unset) every call is a no-op.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Mapping

import structlog

from supervisor.redact import redact

log = structlog.get_logger(__name__)


def _address(raw: str) -> str | bytes | None:
    """Turn $NOTIFY_SOCKET into a socket address; a leading '@' is Linux's abstract namespace."""
    if raw.startswith("@"):
        return b"\0" + raw[1:].encode()
    if raw.startswith("/"):
        return raw
    return None  # vsock:... and other forms are not used for user/system services here


def _one_line(text: str) -> str:
    """STATUS= must be a single line: a newline would start a new assignment."""
    return " ".join(text.split())


class Notifier:
    """Sends state changes to the service manager; all methods return whether a datagram went out."""

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        env = os.environ if env is None else env
        raw = env.get("NOTIFY_SOCKET", "")
        self.socket_path = raw or None
        self._addr = _address(raw) if raw else None
        if raw and self._addr is None:
            log.warning("notify socket address not supported", notify_socket=raw)

    @property
    def enabled(self) -> bool:
        return self._addr is not None

    def send(self, **fields: str | int) -> bool:
        """Send one datagram of KEY=value lines (keys upper-case, e.g. send(READY=1, STATUS="ok"))."""
        if self._addr is None:
            return False
        lines = [f"{key.upper()}={_one_line(str(value))}" for key, value in fields.items()]
        payload = ("\n".join(lines) + "\n").encode()
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
                sock.sendto(payload, self._addr)
        except OSError as exc:
            log.warning(
                "sd_notify failed", notify_socket=self.socket_path, error=str(exc), fields=list(fields)
            )
            return False
        return True

    def ready(self, status: str | None = None) -> bool:
        """READY=1: call only once state is loaded and reconciled with Slurm."""
        if status is None:
            return self.send(READY=1)
        return self.send(READY=1, STATUS=redact(status))

    def status(self, text: str) -> bool:
        return self.send(STATUS=redact(text))

    def watchdog(self) -> bool:
        return self.send(WATCHDOG=1)

    def stopping(self, status: str | None = None) -> bool:
        if status is None:
            return self.send(STOPPING=1)
        return self.send(STOPPING=1, STATUS=redact(status))

    def extend_timeout(self, seconds: float) -> bool:
        """Ask for more start/stop time (EXTEND_TIMEOUT_USEC) while visibly making progress, e.g. waiting
        for slurmctld before the first reconciliation; resend before it runs out."""
        return self.send(EXTEND_TIMEOUT_USEC=int(seconds * 1_000_000))

    def reloading(self) -> bool:
        """RELOADING=1 + MONOTONIC_USEC, as Type=notify-reload expects; send ready() when done."""
        return self.send(RELOADING=1, MONOTONIC_USEC=time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000)


def watchdog_interval_s(env: Mapping[str, str] | None = None) -> float | None:
    """Half of WATCHDOG_USEC in seconds, or None when the watchdog is off or meant for another process.

    systemd sets WATCHDOG_PID when the variable must only be honoured by that pid
    (e.g. after a fork): a child must not keep its parent alive.
    """
    env = os.environ if env is None else env
    raw = env.get("WATCHDOG_USEC")
    if not raw:
        return None
    pid = env.get("WATCHDOG_PID")
    if pid and pid.strip() != str(os.getpid()):
        return None
    try:
        usec = int(raw)
    except ValueError:
        log.warning("ignoring malformed WATCHDOG_USEC", value=raw)
        return None
    if usec <= 0:
        return None
    return usec / 2 / 1_000_000
