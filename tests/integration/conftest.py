"""Fixtures for tests against the real dev Slurm cluster (scripts/dev-cluster).

`slurm_cluster` brings the cluster up once per session (idempotent: quick when it already runs) and hands out
its SLURM_CONF; the extra `up` flags come from SHEPHERD_DEV_CLUSTER_ARGS (e.g. "--with-dbd"), default none.

The Slurm version is SHEPHERD_DEV_SLURM (or `--slurm X` in SHEPHERD_DEV_CLUSTER_ARGS), default 22.05; every
cluster of the session, private ones included, runs that version. A version that runs in its own root (24.11)
prints SLURM_BIN_DIR: its client wrappers go first on PATH and into SHEPHERD_SLURM__BIN_DIR, in this process's
environment too, so tests, `sbatch` on PATH and the daemon drive it exactly like 22.05.
"""

from __future__ import annotations

import getpass
import os
import shlex
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support import workers

REPO = Path(__file__).resolve().parents[2]
_ARGS = shlex.split(os.environ.get("SHEPHERD_DEV_CLUSTER_ARGS", ""))
if "--slurm" in _ARGS[:-1]:
    os.environ["SHEPHERD_DEV_SLURM"] = _ARGS[_ARGS.index("--slurm") + 1]
SLURM_VERSION = os.environ.get("SHEPHERD_DEV_SLURM", "22.05")
# Under pytest-xdist each worker past the first gets its own session cluster (tests/support/workers.py): a
# test that stops slurmctld or floods the queue on one worker never meets another worker's test. Set in
# os.environ so all this worker starts (scripts/dev-cluster, the demo, nested pytest sessions) finds it too.
os.environ.update(workers.session_cluster_env(SLURM_VERSION, workers.index()))
DEV_CLUSTER = REPO / "scripts" / "dev-cluster"
RAY_SUB = REPO / "supervisor" / "slurm" / "launchers" / "ray.sub"
VENV_BIN = REPO / ".venv" / "bin"
FINAL_STATES = {
    "COMPLETED",
    "FAILED",
    "CANCELLED",
    "TIMEOUT",
    "OUT_OF_MEMORY",
    "NODE_FAIL",
    "BOOT_FAIL",
    "DEADLINE",
}


@dataclass
class SlurmCluster:
    """Handle on the running dev cluster; `env` is what subprocesses need to reach it."""

    conf: str
    env: dict[str, str] = field(default_factory=dict)
    args: tuple[str, ...] = ()
    process_env: dict[str, str] = field(default_factory=dict)  # what _bring_up put in os.environ

    def run(self, *argv: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            argv, env=self.env, capture_output=True, text=True, check=check, timeout=timeout
        )

    def dev_cluster(self, *argv: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return self.run(str(DEV_CLUSTER), *argv, timeout=timeout)

    def ctld_stop(self, kill: bool = False) -> None:
        """Stops only slurmctld (a controller outage); jobs and slurmd keep running."""
        self.dev_cluster("ctld-stop", *(["--kill"] if kill else []))

    def ctld_start(self) -> None:
        self.dev_cluster("ctld-start")

    def nodes(self) -> list[str]:
        out = self.run("sinfo", "-h", "-N", "-o", "%N").stdout.split()
        return sorted(set(out))

    def sbatch(self, *argv: str, cwd: Path | None = None) -> str:
        out = subprocess.run(
            ["sbatch", "--parsable", *argv], env=self.env, capture_output=True, text=True, check=True, cwd=cwd
        )
        return out.stdout.strip().split(";")[0]

    def job_state(self, job: str) -> tuple[str, str]:
        """(state, reason) from squeue -t all; finished jobs stay there for MinJobAge."""
        out = self.run("squeue", "-h", "-t", "all", "-j", job, "-o", "%T|%r", check=False).stdout.strip()
        state, _, reason = out.partition("|")
        return state, reason

    def wait_final(self, job: str, timeout: float = 120) -> str:
        deadline = time.monotonic() + timeout
        state = ""
        while time.monotonic() < deadline:
            state, _ = self.job_state(job)
            if state in FINAL_STATES:
                return state
            time.sleep(0.5)
        raise AssertionError(f"job {job} not finished after {timeout}s (last state {state!r})")

    def exit_code(self, job: str) -> str:
        out = self.run("scontrol", "show", "job", "-o", job).stdout
        return next(f.split("=", 1)[1] for f in out.split() if f.startswith("ExitCode="))


def cluster_env(up_stdout: str, base: dict[str, str]) -> dict[str, str]:
    """`base` plus what `dev-cluster up` printed: SLURM_CONF, SLURM_BIN_DIR (first on PATH; the daemon's)."""
    lines = dict(line.split("=", 1) for line in up_stdout.splitlines() if line.startswith("SLURM_"))
    env = dict(base)
    env["SLURM_CONF"] = lines["SLURM_CONF"]
    env["SHEPHERD_DEV_SLURM"] = SLURM_VERSION
    previous = env.pop("SHEPHERD_SLURM__BIN_DIR", None)  # another cluster's wrappers leave PATH too
    path = [p for p in env.get("PATH", "/usr/bin:/bin").split(":") if p != previous]
    if "SLURM_BIN_DIR" in lines:
        env["SHEPHERD_SLURM__BIN_DIR"] = lines["SLURM_BIN_DIR"]
        path.insert(0, lines["SLURM_BIN_DIR"])
    env["PATH"] = ":".join(path)
    return env


def _use_in_process(env: dict[str, str]) -> None:
    """Make `env`'s cluster the one this process (and what it starts from os.environ) talks to."""
    for key in ("SLURM_CONF", "PATH", "SHEPHERD_SLURM__BIN_DIR"):
        if key in env:
            os.environ[key] = env[key]
        else:
            os.environ.pop(key, None)


def _bring_up(args: tuple[str, ...]) -> SlurmCluster:
    if os.geteuid() != 0:
        pytest.skip("the dev Slurm cluster needs root (it runs munged/slurmctld/slurmd)")
    if not DEV_CLUSTER.exists():
        pytest.skip("scripts/dev-cluster is missing")
    if shutil.which("apt-get") is None and shutil.which("slurmctld") is None:
        pytest.skip("no Slurm packages and no apt-get to install them")
    proc = subprocess.run([str(DEV_CLUSTER), "up", *args], capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        pytest.fail(f"scripts/dev-cluster up {' '.join(args)} failed:\n{proc.stderr[-4000:]}")
    process_env = cluster_env(proc.stdout, dict(os.environ))
    _use_in_process(process_env)
    env = dict(process_env)
    if VENV_BIN.is_dir():
        env["PATH"] = f"{VENV_BIN}:{env['PATH']}"
    return SlurmCluster(conf=env["SLURM_CONF"], env=env, args=args, process_env=process_env)


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[SlurmCluster]:
    own = workers.index() > 0  # a worker's own cluster is stopped at the end; gw0's is scripts/test's
    was_up = (
        own and subprocess.run([str(DEV_CLUSTER), "status"], capture_output=True, timeout=120).returncode == 0
    )
    cluster = _bring_up(tuple(_ARGS))
    yield cluster
    if own and not was_up:
        subprocess.run([str(DEV_CLUSTER), "down", "--wipe"], capture_output=True, timeout=180)


# A private 2-node cluster (own folder, ports, job ids, netns) so the shared one keeps its mode and its jobs.
# The 22.05 values are the historical ones; another version gets its own, so both can run at once.
PRIVATE_2NODE_ENV = workers.private_cluster_env(
    SLURM_VERSION,
    "2node",
    port_offset=2000,
    first_job_id=5000,
    net_id=workers.base(SLURM_VERSION)["net_id"] + 5,
)


@pytest.fixture(autouse=True)
def _no_job_outlives_its_test(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test's Slurm jobs end with it. The daemon is stopped at a test's end, and a job whose driver already
    exited waits up to resume.in_place_wait_s (600 s) for its word from Shepherd (restart in place is the
    default): left running, it held the worker's one node (ray.sub's --exclusive) while the next tests' jobs
    stayed pending. Each worker has a cluster of its own and runs one test at a time, so every job on it is
    this test's."""
    yield
    if "slurm_cluster" in request.fixturenames:
        cluster: SlurmCluster = request.getfixturevalue("slurm_cluster")
        cluster.run("scancel", "--user", getpass.getuser(), check=False)


@pytest.fixture(scope="session")
def slurm_cluster_2nodes(slurm_cluster: SlurmCluster) -> Iterator[SlurmCluster]:
    """Two slurmd, the second in a network namespace, each with its own address (a real 2-node allocation)."""
    if shutil.which("ip") is None or shutil.which("nsenter") is None:
        pytest.skip("iproute2 (ip netns) or nsenter is missing: no second node")
    with private_cluster(slurm_cluster, PRIVATE_2NODE_ENV, "--nodes", "2") as cluster:
        yield cluster


@pytest.fixture
def ray_env(slurm_cluster: SlurmCluster) -> dict[str, str]:
    """Env for ray.sub jobs: the venv's ray first on PATH (what the daemon exports)."""
    if not (VENV_BIN / "ray").exists():
        pytest.skip("ray is not installed in .venv")
    return dict(slurm_cluster.env)


def private_env(offset: int) -> dict[str, str]:
    """Folder, ports, job ids and netns id of a private cluster of the session's version, `offset` away from
    the session cluster's own (so sessions that run on other ports keep their private clusters apart too)."""
    net = workers.base(SLURM_VERSION)["net_id"]
    return workers.private_cluster_env(
        SLURM_VERSION,
        "private",
        port_offset=offset,
        first_job_id=70000 + offset,
        net_id=(net + offset) % 200 + 30,
    )


@contextmanager
def private_cluster(session: SlurmCluster, env: dict[str, str], *args: str) -> Iterator[SlurmCluster]:
    """A private cluster (`env`: folder, ports...) brought up with `args`, wiped afterwards; meanwhile this
    process keeps talking to the session's cluster: use the handle's `env`."""
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    down_env = {**os.environ}

    def down() -> None:
        subprocess.run([str(DEV_CLUSTER), "down", "--wipe"], env=down_env, capture_output=True, timeout=180)

    try:
        cluster = _bring_up(args)
        cluster.env.update(env)
    except BaseException:
        down()
        raise
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        _use_in_process(session.process_env)
    try:
        yield cluster
    finally:
        down()
