"""Trainer runs for the unit tier as real processes forked from one that imported torch once: each run keeps
its own exit code, signals, stderr and files, without paying torch's and torch._dynamo's imports (4 of a run's
5 s of CPU on the 2-core machines) again.

multiprocessing's forkserver does the forking: a clean interpreter (not the pytest worker) imports the
trainer's heavy modules once and forks a child per run. A child then does what `python -m trainer ARGS` does
after its imports: it runs `trainer.__main__.main` under the run's environment, working folder and stdio, then
what the interpreter does at exit, and exits with main's code. `python -m trainer` itself, the command line
users and the launchers run, keeps its own tests (tests/trainer/conftest.py's `run_cli`, and the integration
tier's jobs).
"""

from __future__ import annotations

import atexit
import io
import multiprocessing
import os
import signal
import subprocess
import sys
import tempfile
import threading
import traceback
from collections.abc import Mapping
from multiprocessing.context import ForkServerContext, ForkServerProcess
from pathlib import Path

# What a child would otherwise import itself: the driver (torch), and torch._dynamo, which torch.optim's first
# optimizer imports (2 s of CPU alone).
PRELOAD = ["trainer.__main__", "trainer.driver", "torch._dynamo"]


def _forkserver() -> ForkServerContext:
    """multiprocessing's one forkserver context; the preload takes effect when its server starts."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)
    return ctx


def _child(argv: list[str], env: dict[str, str], cwd: str, stdout_path: str, stderr_path: str) -> None:
    """In the forked child: the run's stdio, environment and folder, then `main` as `python -m trainer`."""
    for fd, path in ((1, stdout_path), (2, stderr_path)):
        target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(target, fd)
        os.close(target)
    # PYTHONUNBUFFERED's effect: every write reaches the file at once.
    sys.stdout, sys.stderr = (
        io.TextIOWrapper(io.FileIO(fd, "w", closefd=False), "utf-8", "backslashreplace", write_through=True)
        for fd in (1, 2)
    )
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    sys.argv = ["python -m trainer", *argv]
    from trainer.__main__ import main

    code: object = 0
    try:
        code = main(argv)
    except SystemExit as e:
        code = e.code
    except BaseException:
        traceback.print_exc()  # what the interpreter prints for an uncaught exception, and its exit status 1
        code = 1
    # The interpreter's own exit, which the forkserver's os._exit skips: wait for non-daemon threads, then run
    # the exit handlers.
    threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()
    raise SystemExit(code)


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="backslashreplace")
    except FileNotFoundError:  # the child died before it opened its stdio
        return ""


class TrainerProcess:
    """A started run, with the part of `subprocess.Popen`'s interface the tests use."""

    def __init__(self, process: ForkServerProcess, stdout_path: Path, stderr_path: Path) -> None:
        self._process = process
        self._stdout_path = stdout_path
        self._stderr_path = stderr_path

    @property
    def pid(self) -> int:
        assert self._process.pid is not None  # set by start()
        return self._process.pid

    @property
    def returncode(self) -> int | None:
        return self._process.exitcode

    def poll(self) -> int | None:
        return self.returncode

    def send_signal(self, signum: int) -> None:
        if self._process.exitcode is None:
            os.kill(self.pid, signum)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def wait(self, timeout: float | None = None) -> int:
        self._process.join(timeout)
        code = self.returncode
        if code is None:
            raise subprocess.TimeoutExpired(["python", "-m", "trainer"], timeout or 0.0)
        return code

    def output(self) -> tuple[str, str]:
        """(stdout, stderr) as written so far."""
        return _read(self._stdout_path), _read(self._stderr_path)


def start(args: list[str], env: Mapping[str, str], cwd: Path, io_dir: Path) -> TrainerProcess:
    """Fork a run of `python -m trainer ARGS`; its stdout and stderr go to files in `io_dir`."""
    io_dir.mkdir(parents=True, exist_ok=True)
    stdout_path, stderr_path = io_dir / "stdout", io_dir / "stderr"
    # Daemonic: a run a failed test left going ends with the pytest worker, which would otherwise wait for it.
    process = _forkserver().Process(
        target=_child, args=(args, dict(env), str(cwd), str(stdout_path), str(stderr_path)), daemon=True
    )
    process.start()
    return TrainerProcess(process, stdout_path, stderr_path)


def run(
    args: list[str], env: Mapping[str, str], cwd: Path, timeout: float
) -> subprocess.CompletedProcess[str]:
    """`subprocess.run(["python", "-m", "trainer", *args], capture_output=True, text=True)`, forked."""
    with tempfile.TemporaryDirectory(prefix="trainer-io-") as io_dir:
        proc = start(args, env, cwd, Path(io_dir))
        try:
            code = proc.wait(timeout)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
        out, err = proc.output()
    return subprocess.CompletedProcess(["python", "-m", "trainer", *args], code, out, err)
