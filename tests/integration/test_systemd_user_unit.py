"""The unit `shepherd service install` writes, run by a real systemd user manager on the dev Slurm cluster.

This machine's PID 1 is not systemd, so the test starts `systemd --user` itself, in a private mount namespace
where /run/systemd/system exists (the "booted with systemd" check is the only thing that stops it). The
unit is the installed one, unchanged; a drop-in only makes it quick to test (1 s restart delay, a 6 s
watchdog, fast polling) and sends its output to a file, as there is no journald. What it proves, with
systemd's own bookkeeping: `start` returns only after READY=1 and the STATUS= line is set; WATCHDOG=1
arrives; the hardening still lets the daemon run sbatch/squeue through munge; SIGHUP reloads; a SIGKILLed
daemon and one that stops pinging the watchdog are both restarted; `stop` ends it cleanly.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.daemon import REPO, DaemonProcess, wait_for
from tests.support.specs import write_spec

pytestmark = pytest.mark.slurm

SYSTEMD = Path("/lib/systemd/systemd")

DROP_IN = """\
[Service]
RestartSec=1
WatchdogSec=6
Environment="SHEPHERD_SLURM__POLL_INTERVAL_S=1"
Environment="SHEPHERD_SLURM__STEADY_POLL_INTERVAL_S=2"
Environment="SHEPHERD_SLURM__IDLE_POLL_INTERVAL_S=2"
Environment="SHEPHERD_LAUNCH_SCRIPT={plain}"
StandardOutput=append:{log}
StandardError=append:{log}
"""


@dataclass
class UserManager:
    """A `systemd --user` of our own; `ctl` is `systemctl --user` pointed at it."""

    env: dict[str, str]
    proc: subprocess.Popen[bytes]
    home: Path

    def ctl(self, *args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["systemctl", "--user", *args],
            env=self.env,
            capture_output=True,
            text=True,
            check=check,
            timeout=timeout,
        )

    def show(self, unit: str = "shepherd") -> dict[str, str]:
        props = "ActiveState,SubState,Result,MainPID,NRestarts,StatusText,WatchdogTimestampMonotonic"
        out = self.ctl("show", unit, f"--property={props}").stdout
        return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def _manager_answers(env: dict[str, str]) -> bool:
    proc = subprocess.run(
        ["systemctl", "--user", "show", "--property=SystemState", "--value"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=10,
    )
    return proc.returncode == 0 and proc.stdout.strip() in {"running", "degraded"}


@pytest.fixture
def user_manager(tmp_path: Path, slurm_cluster: Any) -> Iterator[UserManager]:
    if not SYSTEMD.exists() or shutil.which("systemctl") is None or shutil.which("unshare") is None:
        pytest.skip("needs systemd (/lib/systemd/systemd, systemctl) and unshare (util-linux)")
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        pytest.skip(f"cannot make a private mount namespace here: {probe.stderr.strip()}")
    booted = tmp_path / "run-systemd"
    (booted / "system").mkdir(parents=True)
    runtime = tmp_path / "xdg-runtime"
    runtime.mkdir(mode=0o700)
    home = tmp_path / "home"
    home.mkdir()
    env = dict(slurm_cluster.env)
    env.pop("DBUS_SESSION_BUS_ADDRESS", None)
    env.update(XDG_RUNTIME_DIR=str(runtime), HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"))
    manager_log = (tmp_path / "manager.log").open("wb")
    proc = subprocess.Popen(
        [
            "unshare",
            "-m",
            "--propagation",
            "private",
            "sh",
            "-c",
            f'mount --bind "$1" /run/systemd && exec {SYSTEMD} --user',
            "sh",
            str(booted),
        ],
        env=env,
        stdout=manager_log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    manager_log.close()
    manager = UserManager(env, proc, home)
    try:
        wait_for(lambda: _manager_answers(env) or proc.poll() is not None, timeout=30, what="systemd --user")
        if proc.poll() is not None:
            pytest.fail(f"systemd --user exited {proc.returncode}: {(tmp_path / 'manager.log').read_text()}")
        yield manager
    finally:
        manager.ctl("stop", "shepherd", check=False, timeout=60)
        manager.ctl("exit", check=False, timeout=30)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def restarted(um: UserManager, before: dict[str, str], why: str) -> dict[str, str]:
    """Wait until systemd restarted the daemon once more and the new one said READY=1 again."""

    def check() -> dict[str, str] | None:
        now = um.show()
        again = int(now["NRestarts"]) == int(before["NRestarts"]) + 1
        fresh = now["MainPID"] not in ("0", before["MainPID"])
        return now if again and fresh and now["SubState"] == "running" else None

    result: dict[str, str] = wait_for(check, timeout=90, what=f"a restart after {why}")
    return result


def test_the_installed_user_unit_runs_under_a_real_systemd_user_manager(
    user_manager: UserManager, tmp_path: Path
) -> None:
    um = user_manager
    cli = DaemonProcess(tmp_path / "root", env=um.env)  # only its CLI helpers: systemd runs the daemon
    installed = cli.cli("service", "install").stdout
    unit = um.home / ".config" / "systemd" / "user" / "shepherd.service"
    assert f"Wrote {unit}" in installed and "systemctl --user daemon-reload" in installed
    daemon_log = tmp_path / "daemon.log"
    drop_in = unit.parent / "shepherd.service.d"
    drop_in.mkdir()
    # ray.sub's log layout without Ray: the unit's sandbox is the subject, and a real Ray here would be one
    # more Ray user on the host, which NeMo RL's ray.sub (`ray stop`, in tests beside this one) kills.
    (drop_in / "test.conf").write_text(
        DROP_IN.format(log=daemon_log, plain=REPO / "tests" / "support" / "plain.sub")
    )
    um.ctl("daemon-reload")

    # Type=notify: `start` returns once the daemon said READY=1, i.e. after it reconciled with Slurm.
    um.ctl("start", "shepherd")
    up = um.show()
    assert (up["ActiveState"], up["SubState"]) == ("active", "running"), up
    assert up["StatusText"].startswith("runs 0 active"), up
    wait_for(lambda: "daemon ready" in daemon_log.read_text(), timeout=20, what="the ready log line")
    wait_for(lambda: int(um.show()["WatchdogTimestampMonotonic"]) > 0, timeout=20, what="WATCHDOG=1")

    # Under NoNewPrivileges, the seccomp filter and the address-family list, sbatch and squeue still work.
    spec = write_spec(tmp_path, "unit-run", ["python", "-c", "print('hello from the unit')"])
    run = cli.submit(spec)
    assert cli.wait_state(run, {"COMPLETED", "FAILED"}, timeout=120)["state"] == "COMPLETED"

    um.ctl("reload", "shepherd")  # ExecReload: SIGHUP
    wait_for(lambda: "reloaded" in daemon_log.read_text(), timeout=20, what="the reload log line")
    assert um.show()["MainPID"] == up["MainPID"]

    before = um.show()
    os.kill(int(before["MainPID"]), signal.SIGKILL)
    after_kill = restarted(um, before, "SIGKILL")

    # Alive but silent: only the watchdog (WatchdogSec=6, then SIGABRT) can end a stopped daemon.
    os.kill(int(after_kill["MainPID"]), signal.SIGSTOP)
    restarted(um, after_kill, "the watchdog timeout")
    assert cli.status(run)["state"] == "COMPLETED"  # the restarts changed nothing about the run

    um.ctl("stop", "shepherd")
    down = um.show()
    assert (down["ActiveState"], down["Result"]) == ("inactive", "success"), down
