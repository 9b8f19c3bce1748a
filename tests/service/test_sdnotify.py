"""sd_notify datagrams arrive on a real Unix socket, and the daemon never fails because of them."""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING

from supervisor.service.sdnotify import Notifier, watchdog_interval_s

if TYPE_CHECKING:
    from .conftest import NotifyReceiver


def test_ready_status_watchdog_stopping_arrive_on_a_path_socket(notify_socket: NotifyReceiver) -> None:
    n = Notifier({"NOTIFY_SOCKET": notify_socket.address})
    assert n.enabled
    assert n.ready("reconciled 3 runs with slurm")
    assert n.status("runs 2 active, 1 pending, 0 failed")
    assert n.watchdog()
    assert n.stopping()
    assert notify_socket.wait_for(lambda m: len(m) == 4)
    assert notify_socket.snapshot() == [
        {"READY": "1", "STATUS": "reconciled 3 runs with slurm"},
        {"STATUS": "runs 2 active, 1 pending, 0 failed"},
        {"WATCHDOG": "1"},
        {"STOPPING": "1"},
    ]


def test_abstract_namespace_socket_is_reached_via_leading_at(abstract_notify_socket: NotifyReceiver) -> None:
    n = Notifier({"NOTIFY_SOCKET": abstract_notify_socket.address})
    assert n.ready()
    assert abstract_notify_socket.wait_for(lambda m: len(m) == 1)
    assert abstract_notify_socket.raw == [b"READY=1\n"]


def test_reloading_carries_the_monotonic_clock(notify_socket: NotifyReceiver) -> None:
    n = Notifier({"NOTIFY_SOCKET": notify_socket.address})
    before = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
    assert n.reloading()
    after = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
    assert notify_socket.wait_for(lambda m: len(m) == 1)
    msg = notify_socket.snapshot()[0]
    assert msg["RELOADING"] == "1"
    assert before <= int(msg["MONOTONIC_USEC"]) <= after


def test_status_is_one_line_and_redacted(notify_socket: NotifyReceiver) -> None:
    n = Notifier({"NOTIFY_SOCKET": notify_socket.address})
    n.status("bad\nREADY=1 token xoxb-1234567890-abcdefghij")
    assert notify_socket.wait_for(lambda m: len(m) == 1)
    assert notify_socket.raw == [b"STATUS=bad READY=1 token xoxb-***\n"]


def test_without_notify_socket_every_call_is_a_quiet_no_op() -> None:
    n = Notifier({})
    assert not n.enabled
    assert n.ready() is False
    assert n.watchdog() is False


def test_a_missing_socket_is_logged_not_raised(tmp_path: object) -> None:
    n = Notifier({"NOTIFY_SOCKET": "/nonexistent/dir/notify"})
    assert n.ready() is False  # no exception reaches the daemon


def test_watchdog_interval_is_half_of_watchdog_usec_for_this_pid() -> None:
    me = str(os.getpid())
    assert watchdog_interval_s({"WATCHDOG_USEC": "60000000"}) == 30.0
    assert watchdog_interval_s({"WATCHDOG_USEC": "60000000", "WATCHDOG_PID": me}) == 30.0
    assert watchdog_interval_s({"WATCHDOG_USEC": "60000000", "WATCHDOG_PID": "1"}) is None
    assert watchdog_interval_s({}) is None
    assert watchdog_interval_s({"WATCHDOG_USEC": "junk"}) is None


def test_extend_timeout_asks_for_more_start_time_in_microseconds(notify_socket: NotifyReceiver) -> None:
    assert Notifier({"NOTIFY_SOCKET": notify_socket.address}).extend_timeout(90)
    assert notify_socket.wait_for(lambda m: len(m) == 1)
    assert notify_socket.snapshot() == [{"EXTEND_TIMEOUT_USEC": "90000000"}]
