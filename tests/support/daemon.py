"""Run the real `shepherd daemon` as a subprocess and wait on what it records."""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from unittest import mock

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
        code, out, err = self.status_json(run)
        if run is None and code != 0:
            raise AssertionError(f"shepherd status --json failed ({code}): {err}\n{out}")
        return json.loads(out) if code == 0 else {}

    def status_json(self, run: str | None = None) -> tuple[int, str, str]:
        """`shepherd status --json [RUN]`: exit code, stdout, stderr. The same CLI code, run in this process
        with the daemon's environment when the daemon runs this checkout's code: tests ask for it in wait
        loops several times a second, and a new interpreter per ask (~0.7 s of CPU for its imports) was a
        large share of the integration tier's CPU on 2 cores. Another `shepherd` (an installed wheel's) is
        asked as a subprocess."""
        args = ["status", "--json"] + ([run] if run else [])
        if self.shepherd != SHEPHERD:
            res = self.cli(*args, check=False)
            return res.returncode, res.stdout, res.stderr
        from supervisor.cli.main import main

        out, err = io.StringIO(), io.StringIO()
        with (
            mock.patch.dict(os.environ, self.env, clear=True),
            contextlib.redirect_stdout(out),
            contextlib.redirect_stderr(err),
            contextlib.chdir(self.cwd),
        ):
            code = main(["--root", str(self.root), *args])
        return code, out.getvalue(), err.getvalue()

    def wait_state(self, run: str, states: set[str] | str, timeout: float = 90.0) -> dict[str, Any]:
        wanted = {states} if isinstance(states, str) else states

        def check() -> Any:
            s = self.status(run)
            if not s:
                return None  # not claimed from the queue yet
            if s["state"] == "REJECTED" and "REJECTED" not in wanted:  # it never will be: say why at once
                raise AssertionError(f"{run} was rejected at intake: {s['reasons']}")
            if s["state"] not in wanted:
                return None
            # A decision is recorded, carried out (the state changes), then its outcome commits: wait for
            # that too, so the caller reads the outcome of the decision that brought the state.
            decisions = s.get("decisions", [])
            unsettled = [d for d in decisions if not d.get("outcome") and d.get("action") != "none"]
            return None if unsettled else s

        return dict(wait_for(check, timeout, 0.3, f"{run} in {wanted}"))

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
