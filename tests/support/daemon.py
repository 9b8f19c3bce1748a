"""Run the real `shepherd daemon` as a subprocess and wait on what it records."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
SHEPHERD = [sys.executable, "-m", "supervisor.cli"]


def wait_for(
    predicate: Callable[[], Any], timeout: float = 60.0, interval: float = 0.2, what: str = ""
) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what or predicate}; last={last!r}")


class DaemonProcess:
    """One daemon on a private root, with fast polling so tests stay short."""

    def __init__(self, root: Path, env: dict[str, str] | None = None, **settings: str) -> None:
        self.root = root
        self.env = dict(os.environ)
        self.env.update(env or {})
        self.env.setdefault("SHEPHERD_SLURM__POLL_INTERVAL_S", "1")
        self.env.setdefault("SHEPHERD_SLURM__STEADY_POLL_INTERVAL_S", "2")
        self.env.setdefault("SHEPHERD_SLURM__IDLE_POLL_INTERVAL_S", "2")
        self.env.setdefault("SHEPHERD_SLURM__COMMAND_TIMEOUT_S", "15")
        self.env["PYTHONUNBUFFERED"] = "1"
        for k, v in settings.items():
            self.env[f"SHEPHERD_{k.upper()}"] = v
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = root / "daemon.log"
        self.shepherd = list(SHEPHERD)  # how `shepherd` is run: an installed one's script, for instance
        self.cwd = REPO

    def start(self, extra_env: dict[str, str] | None = None) -> DaemonProcess:
        self.root.mkdir(parents=True, exist_ok=True)
        env = dict(self.env)
        env.update(extra_env or {})
        log = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            [*self.shepherd, "--root", str(self.root), "daemon", "--log-format", "json"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=self.cwd,
        )
        log.close()
        return self

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 20.0) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        code = self.proc.returncode
        self.proc = None
        return code

    def wait_exit(self, timeout: float = 60.0) -> int:
        assert self.proc is not None
        return self.proc.wait(timeout)

    def cli(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        res = subprocess.run(
            [*self.shepherd, "--root", str(self.root), *args],
            env=self.env,
            capture_output=True,
            text=True,
            cwd=self.cwd,
        )
        if check and res.returncode != 0:
            raise AssertionError(
                f"shepherd {' '.join(args)} failed ({res.returncode}): {res.stderr}\n{res.stdout}"
            )
        return res

    def submit(self, spec: Path) -> str:
        return self.cli("submit", str(spec)).stdout.strip()

    def status(self, run: str | None = None) -> Any:
        """The JSON status; for a spec still in the queue, state UNCLAIMED (REJECTED once the intake refused
        it); for a run id nobody printed, an empty dict."""
        args = ["status", "--json"] + ([run] if run else [])
        res = self.cli(*args, check=run is None)
        return json.loads(res.stdout) if res.returncode == 0 else {}

    def wait_state(self, run: str, states: set[str] | str, timeout: float = 90.0) -> dict[str, Any]:
        wanted = {states} if isinstance(states, str) else states

        def check() -> Any:
            res = self.cli("status", "--json", run, check=False)
            if res.returncode != 0:
                return None  # not claimed from the queue yet
            s = json.loads(res.stdout)
            if s["state"] == "REJECTED" and "REJECTED" not in wanted:  # it never will be: say why at once
                raise AssertionError(f"{run} was rejected at intake: {s['reasons']}")
            return s if s["state"] in wanted else None

        return dict(wait_for(check, timeout, 0.3, f"{run} in {wanted}"))

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
