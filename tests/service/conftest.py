"""A real Unix datagram socket standing in for systemd's notify socket."""

from __future__ import annotations

import os
import socket
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest


class NotifyReceiver:
    """Collects the datagrams a Notifier sends, parsed into dicts, from a background thread."""

    def __init__(self, address: str) -> None:
        self.address = address  # what goes in NOTIFY_SOCKET
        self.messages: list[dict[str, str]] = []
        self.raw: list[bytes] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        bind = b"\0" + address[1:].encode() if address.startswith("@") else address
        self._sock.bind(bind)
        self._sock.settimeout(0.02)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                data = self._sock.recv(4096)
            except TimeoutError:
                continue
            except OSError:
                return
            fields = dict(line.split("=", 1) for line in data.decode().splitlines() if line)
            with self._lock:
                self.raw.append(data)
                self.messages.append(fields)

    def snapshot(self) -> list[dict[str, str]]:
        with self._lock:
            return list(self.messages)

    def clear(self) -> None:
        with self._lock:
            self.messages.clear()
            self.raw.clear()

    def count(self, key: str) -> int:
        return sum(1 for m in self.snapshot() if key in m)

    def wait_for(self, predicate: object, timeout: float = 10.0) -> bool:
        """Poll until predicate(messages) holds; the timeout only bounds a failing test."""
        assert callable(predicate)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate(self.snapshot()):
                return True
            time.sleep(0.01)
        return bool(predicate(self.snapshot()))

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self._sock.close()


@pytest.fixture
def notify_socket() -> Iterator[NotifyReceiver]:
    """A filesystem-path notify socket (short path: sun_path is limited to 108 bytes)."""
    folder = Path(tempfile.mkdtemp(prefix="sdn-", dir="/tmp"))
    path = folder / "notify"
    rx = NotifyReceiver(str(path))
    try:
        yield rx
    finally:
        rx.close()
        if path.exists():
            path.unlink()
        os.rmdir(folder)


@pytest.fixture
def abstract_notify_socket() -> Iterator[NotifyReceiver]:
    rx = NotifyReceiver(f"@shepherd-test-{uuid.uuid4().hex}")
    try:
        yield rx
    finally:
        rx.close()
