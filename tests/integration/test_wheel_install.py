"""Shepherd as its users install it: the built wheel in a venv of its own, run from outside the checkout.

What `pipx install` or `uv tool install` put on a login node has no checkout beside it: the default rules, the
launcher and everything else the daemon reads must come from the package. The wheel is built from the
working tree's sources, installed into a fresh venv, and that venv's `shepherd` runs a daemon on the dev
cluster through a run whose first attempt fails with NeMo RL's "Pretrained run config not found" line, which
only the default rules know (`hf-cache-not-shared`), and is resumed by them to completion.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

import pytest

from tests.support.daemon import REPO, DaemonProcess
from tests.support.specs import FAKE, fake_argv, records, write_spec

pytestmark = pytest.mark.slurm

# Where the project's .venv keeps the wheel's dependencies. The test venv takes them from there, offline:
# a plain folder line in a .pth file appends it to sys.path after the venv's own site-packages, and the .pth
# files inside it are not run (only a site dir's are). One of those is the editable install's finder, which
# maps `supervisor` to the checkout: it must not, and does not, come along. `--system-site-packages` would not
# do: it shows the base interpreter's packages, not .venv's.
DEPS = Path(sysconfig.get_paths()["purelib"])
HF_CACHE_LOG = REPO / "tests" / "data" / "failure-logs" / "hf-cache-not-shared"


def build_wheel(into: Path) -> Path:
    """The wheel of the working tree's sources (copied first: an in-tree build would reuse a stale build/)."""
    src = into / "src"
    for name in ("pyproject.toml", "README.md"):
        src.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, src / name)
    for pkg in ("supervisor", "trainer"):
        shutil.copytree(REPO / pkg, src / pkg, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    pip = [sys.executable, "-m", "pip"]
    # --no-build-isolation: setuptools from .venv (the lock pins it) instead of a download
    subprocess.run(
        [*pip, "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(into / "dist"), str(src)],
        check=True,
        cwd=into,
    )
    [wheel] = (into / "dist").glob("shepherd-*.whl")
    return wheel


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv holding the wheel alone; its dependencies seen through one .pth line (DEPS)."""
    tmp = tmp_path_factory.mktemp("wheel")
    wheel = build_wheel(tmp)
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([venv / "bin" / "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)], check=True)
    purelib = subprocess.run(
        [venv / "bin" / "python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    (Path(purelib) / "shepherd-test-deps.pth").write_text(f"{DEPS}\n")
    return venv


def site_packages(venv: Path) -> Path:
    [sp] = (venv / "lib").glob("python3*/site-packages")
    return sp


def user_env(venv: Path, base: dict[str, str]) -> dict[str, str]:
    """A login node's shell with the tool installed: its bin on PATH; nothing of the checkout anywhere."""
    env = {k: v for k, v in base.items() if k not in {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV"}}
    path = [p for p in env.get("PATH", "/usr/bin:/bin").split(":") if not p.startswith(str(REPO))]
    env["PATH"] = ":".join([str(venv / "bin"), *path])
    return env


def run(venv: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [venv / "bin" / "shepherd", *args],
        env=user_env(venv, dict(os.environ)),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


PROBE = """
import json, sys
import supervisor
from supervisor.rules.loader import DEFAULT_RULES_PATH
from supervisor.slurm.launchers.shepherd import script
print(json.dumps({"package": supervisor.__file__, "rules": str(DEFAULT_RULES_PATH), "launcher": str(script()),
                  "sys_path": sys.path, "editable_finder": any("__editable__" in m for m in sys.modules)}))
"""


def test_the_installed_command_has_its_rules_and_version(venv: Path, tmp_path: Path) -> None:
    where = json.loads(
        subprocess.run(
            [venv / "bin" / "python", "-c", PROBE],
            env=user_env(venv, dict(os.environ)),
            cwd=tmp_path,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    package = site_packages(venv) / "supervisor"
    assert where["package"] == str(package / "__init__.py")
    assert where["rules"] == str(package / "rules" / "defaults" / "default.yaml")
    assert where["launcher"] == str(package / "slurm" / "launchers" / "ray.sub")
    assert Path(where["rules"]).is_file() and Path(where["launcher"]).is_file()
    # the checkout is nowhere on sys.path (.venv's site-packages, DEPS, lies inside it), nor its finder
    assert [p for p in where["sys_path"] if p.startswith(str(REPO)) and p != str(DEPS)] == []
    assert where["editable_finder"] is False

    version = run(venv, tmp_path, "--version")
    assert version.returncode == 0 and version.stdout.startswith("shepherd 0.")

    check = run(venv, tmp_path, "rules", "check")
    assert check.returncode == 0, check.stderr
    assert check.stdout.strip() == f"ok: {site_packages(venv)}/supervisor/rules/defaults/default.yaml"

    log = tmp_path / "driver.log"
    shutil.copy2(sorted(HF_CACHE_LOG.glob("*.log"))[0], log)
    replay = run(venv, tmp_path, "rules", "test", "--log", str(log), "--json")
    assert replay.returncode == 0, replay.stderr
    assert "hf-cache-not-shared" in replay.stdout


def supervisor_frames(pid: int) -> list[str]:
    """The files of every `supervisor` frame the running process is in, read from the process itself."""
    dump = subprocess.run(
        [Path(sys.executable).parent / "py-spy", "dump", "--pid", str(pid), "--json"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    threads: list[dict[str, Any]] = json.loads(dump.stdout)
    return [
        f["filename"]
        for t in threads
        for f in t["frames"]
        if "/supervisor/" in f["filename"].replace("\\", "/")
    ]


def test_an_installed_daemon_resumes_a_run_with_the_default_rules(
    venv: Path, tmp_path: Path, slurm_cluster: Any
) -> None:
    outside = tmp_path / "home"  # the daemon's and the CLI's working directory: no checkout there
    outside.mkdir()
    job = tmp_path / "job"  # the job's script and launcher too lie outside the checkout
    job.mkdir()
    fake = shutil.copy2(FAKE, job / FAKE.name)
    launcher = shutil.copy2(REPO / "tests" / "support" / "plain.sub", job / "plain.sub")
    argv = fake_argv(job, "wheel-hf", "hf-cache")
    argv[1] = str(fake)
    spec = write_spec(job, "wheel-hf", argv, shared_cache_dir=job / "shared-cache")

    env = user_env(venv, slurm_cluster.env)
    env["SHEPHERD_LAUNCH_SCRIPT"] = str(launcher)  # ray.sub's log layout without Ray: seconds per attempt
    # the dev cluster's node is this machine, so every path here is one its jobs see
    env["SHEPHERD_PREFLIGHT__SHARED_PATHS"] = '["/"]'
    d = DaemonProcess(tmp_path / "root", env=env)
    d.env = user_env(venv, d.env)  # DaemonProcess starts from this process's environment: clean it again
    d.shepherd = [str(venv / "bin" / "shepherd")]
    d.cwd = outside
    d.start()
    try:
        run_id = d.submit(spec)
        final = d.wait_state(run_id, {"COMPLETED", "FAILED", "GAVE_UP"}, timeout=180)
        status = d.status(run_id)
        assert d.proc is not None
        frames = supervisor_frames(d.proc.pid)
    finally:
        d.stop()

    assert final["state"] == "COMPLETED", status
    assert final["attempts"] == 2
    [decision] = [x for x in status["decisions"] if x["rule"] == "hf-cache-not-shared"]
    assert decision["attempt"] == 1 and "resuming" in decision["outcome"]
    first, second = records(job, "wheel-hf")
    assert first["hf_home"] is None
    assert second["hf_home"] == f"{job / 'shared-cache'}/huggingface"
    # the daemon that did it ran the wheel's code, not the checkout's
    assert frames, "py-spy saw no supervisor frame in the daemon"
    assert all(f.startswith(str(site_packages(venv) / "supervisor")) for f in frames), frames
