"""Runs ON a node of a hung job (act/forensics.py sends its source through `srun --overlap ... python3 -c`):
where every Python process of the job is stuck, plus `nvidia-smi` and `ray status`, as one JSON object on
stdout, so the evidence is taken before the job is cancelled and dies with it.

Standard library only (the node has a Python, not necessarily ours). Every command is bounded in time. Stacks:
`py-spy dump --json` (ptrace); where that is refused (Yama ptrace_scope >= 1, containers) and the process
catches SIGUSR2 (our trainer registers `faulthandler` on it), the signal, then the dump it wrote to
`$SHEPHERD_STACKS_DIR/<pid>.txt` (default /tmp/shepherd-stacks). A process that does not catch SIGUSR2 is
never signalled (the default action would kill it).
Usage: python3 forensics_probe.py JOB_ID [TIMEOUT_S]
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

MAX_TEXT = 64 * 1024
MAX_PROCS = 64
STACKS_DIR = "/tmp/shepherd-stacks"
# Ray's own daemons (dashboard, log monitor, agents) are Python too; their stacks say nothing of the run.
_RAY_DAEMONS = (
    "dashboard",
    "log_monitor",
    "monitor.py",
    "runtime_env",
    "ray_client_server",
    "ray.util.client.server",
    "autoscaler",
)
_RAY_AGENTS = ("ray::DashboardAgent", "ray::RuntimeEnvAgent")  # titles of Ray's agents


def _read(path: str, limit: int = MAX_TEXT) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read(limit)
    except OSError:
        return b""


def _environ(pid: int) -> dict[str, str]:
    env: dict[str, str] = {}
    for item in _read(f"/proc/{pid}/environ", 1 << 20).split(b"\0"):
        k, eq, v = item.partition(b"=")
        if eq:
            env[k.decode(errors="replace")] = v.decode(errors="replace")
    return env


def _ancestors() -> set[int]:
    out: set[int] = set()
    pid = os.getpid()
    while pid > 1 and pid not in out:
        out.add(pid)
        stat = _read(f"/proc/{pid}/stat", 4096).decode(errors="replace")
        try:
            pid = int(stat.rsplit(")", 1)[1].split()[1])
        except (IndexError, ValueError):
            break
    return out


def ray_daemon(cmd: list[str]) -> bool:
    """Ray's own processes (dashboard, agents, client server, monitors): their stacks say nothing here."""
    if cmd and cmd[0].startswith("ray::"):
        return cmd[0].startswith(_RAY_AGENTS)
    return any(d in " ".join(cmd) for d in _RAY_DAEMONS)


def job_processes(job_id: str) -> list[tuple[int, list[str], dict[str, str]]]:
    """Python processes of the job on this node (its SLURM_JOB_ID), not this probe's step or its parents."""
    mine = _ancestors()
    own_step = os.environ.get("SLURM_STEP_ID")
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) in mine:
            continue
        pid = int(name)
        env = _environ(pid)
        if env.get("SLURM_JOB_ID") != job_id or (
            own_step is not None and env.get("SLURM_STEP_ID") == own_step
        ):
            continue
        cmd = [c.decode(errors="replace") for c in _read(f"/proc/{pid}/cmdline", 8192).split(b"\0") if c]
        exe = (
            os.path.basename(os.path.realpath(f"/proc/{pid}/exe"))
            if os.path.exists(f"/proc/{pid}/exe")
            else ""
        )
        ray_title = bool(cmd) and cmd[0].startswith("ray::")
        if not (ray_title or exe.startswith("python")) or ray_daemon(cmd):
            continue
        out.append((pid, cmd, env))
    return out[:MAX_PROCS]


def _run(argv: list[str], timeout: float, env: dict[str, str] | None = None) -> tuple[int | None, str, str]:
    try:
        p = subprocess.run(argv, capture_output=True, timeout=timeout, check=False, env=env)
        out, err = p.stdout[: MAX_TEXT * 4], p.stderr[:4096]
        return p.returncode, out.decode(errors="replace"), err.decode(errors="replace")
    except subprocess.TimeoutExpired:
        return None, "", f"did not answer within {timeout:g}s"
    except OSError as exc:
        return None, "", str(exc)


def ray_client_env(found: list[tuple[int, list[str], dict[str, str]]]) -> dict[str, str]:
    """How to reach the job's own Ray cluster: the RAY_ADDRESS its processes were started with (ray.sub
    exports it to the driver) and its RAY_AUTH_* (ray.sub's per-job token: the GCS refuses a client without
    it). Without an address `ray status` reads /tmp/ray/ray_current_cluster, which names whichever Ray last
    started on the node (another job's, one long gone), and waits on that GCS until its timeout."""
    for _, _, env in found:
        address = env.get("RAY_ADDRESS", "")
        if address and "://" not in address and address not in ("auto", "local"):
            return {k: v for k, v in env.items() if k == "RAY_ADDRESS" or k.startswith("RAY_AUTH_")}
    return {}


def _bin_dir(pid: int, cmd: list[str], env: dict[str, str]) -> str | None:
    """The bin/ of the process's own Python (the job's venv): argv[0] from its cwd, or found on its PATH."""
    if not cmd or cmd[0].startswith("ray::"):
        return None
    if "/" in cmd[0]:
        try:
            return os.path.dirname(os.path.join(os.readlink(f"/proc/{pid}/cwd"), cmd[0]))
        except OSError:
            return None
    for d in env.get("PATH", "").split(":"):
        if d and os.path.isfile(os.path.join(d, cmd[0])):
            return d
    return None


def _tool(name: str, dirs: list[str]) -> str | None:
    """`name` beside the job's own Pythons (where the job's packages are), else on this probe's PATH."""
    for d in dirs:
        path = os.path.join(d, name)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return shutil.which(name)


def _catches(pid: int, sig: int) -> bool:
    for line in _read(f"/proc/{pid}/status", 16384).decode(errors="replace").splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) >> (sig - 1) & 1)
    return False


def stacks(pid: int, env: dict[str, str], spy: str | None, timeout: float) -> dict[str, object]:
    why = "py-spy not installed where the job runs"
    if spy:
        rc, out, err = _run([spy, "dump", "--json", "--pid", str(pid)], timeout)
        if rc == 0:
            try:
                return {"method": "py-spy", "threads": json.loads(out)}
            except ValueError:
                why = "py-spy gave no JSON"
        else:
            why = f"py-spy: {(err or out).strip().splitlines()[0] if (err or out).strip() else rc}"
    if not _catches(pid, signal.SIGUSR2):
        return {"method": "none", "error": f"{why}; the process does not catch SIGUSR2 (no faulthandler)"}
    path = os.path.join(env.get("SHEPHERD_STACKS_DIR", STACKS_DIR), f"{pid}.txt")
    try:
        before = os.path.getsize(path)
    except OSError:
        before = 0
    try:
        os.kill(pid, signal.SIGUSR2)
    except OSError as exc:
        return {"method": "none", "error": f"{why}; SIGUSR2: {exc}"}
    # faulthandler writes from inside the process: wait until the file grew and then stopped growing
    deadline = time.monotonic() + min(timeout, 5.0)
    text, size = b"", -1
    while time.monotonic() < deadline:
        time.sleep(0.2)
        try:
            with open(path, "rb") as f:
                f.seek(before)
                text = f.read(MAX_TEXT)
        except OSError:
            continue
        if text and len(text) == size:
            break
        size = len(text)
    if not text:
        return {"method": "none", "error": f"{why}; nothing written to {path} after SIGUSR2"}
    return {"method": "faulthandler", "text": text.decode(errors="replace"), "why": why}


def main() -> None:
    job_id = sys.argv[1]
    timeout = float(sys.argv[2]) if len(sys.argv) > 2 else 10.0
    found = job_processes(job_id)
    dirs = list(dict.fromkeys(d for pid, cmd, env in found if (d := _bin_dir(pid, cmd, env))))
    spy = _tool("py-spy", dirs)
    procs = []
    for pid, cmd, env in found:
        rec: dict[str, object] = {
            "pid": pid,
            "cmdline": cmd[:8],
            "rank": env.get("RANK") or env.get("SLURM_PROCID"),
        }
        rec.update(stacks(pid, env, spy, timeout))
        procs.append(rec)
    scope = _read("/proc/sys/kernel/yama/ptrace_scope", 16).decode().strip() or None
    out: dict[str, object] = {
        "node": os.environ.get("SLURMD_NODENAME") or socket.gethostname(),
        "processes": procs,
        "ptrace_scope": scope,
        "py_spy": spy,
    }
    if shutil.which("nvidia-smi"):
        _, text, err = _run(["nvidia-smi"], timeout)
        out["nvidia_smi"] = text or err
    ray = _tool("ray", dirs)
    if ray:
        client = ray_client_env(found)  # holds the job's token: passed to ray's env only, never written out
        ray_env = {**os.environ, **client} if client else None
        address = ["--address", client["RAY_ADDRESS"]] if client else []
        _, text, err = _run([ray, "status", *address], timeout, ray_env)
        out["ray_status"] = text or err
        _, text, err = _run([ray, "list", "actors", "--detail"], timeout, ray_env)
        out["ray_actors"] = text[:MAX_TEXT] or err
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
