"""The I/O side of `shepherd doctor`: ask Slurm, munge, the filesystems, Slack and systemd, each with a time
limit, and hand what was found to the pure checks."""

from __future__ import annotations

import getpass
import os
import shutil
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path

import anyio
import anyio.to_thread
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from supervisor.doctor import checks
from supervisor.doctor.checks import Finding
from supervisor.domain.envfiles import EnvFileError
from supervisor.intake.queue import queue_dir_problem
from supervisor.lease.keeper import read_lease
from supervisor.lease.model import describe
from supervisor.settings import Settings
from supervisor.slurm.client import SlurmClient, SlurmError
from supervisor.store.placement import VOLATILE
from supervisor.watch.fswatch import detect_fs

PROBE_TIMEOUT_S = 10.0


def _run(argv: list[str], stdin: bytes | None = None) -> tuple[int, str]:
    try:
        p = subprocess.run(argv, input=stdin, capture_output=True, timeout=PROBE_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return 127, str(exc)
    return p.returncode, (p.stdout + p.stderr).decode(errors="replace").strip()


def _munge_socket() -> list[str]:
    """`-S <socket>` when Slurm's AuthInfo names munge's socket (sites and the dev cluster move it)."""
    code, out = _run(["scontrol", "show", "config"])
    for line in out.splitlines() if code == 0 else []:
        if line.strip().startswith("AuthInfo") and "socket=" in line:
            return ["-S", line.split("socket=", 1)[1].split(",")[0].strip()]
    return []


def _munge() -> Finding:
    if shutil.which("munge") is None or shutil.which("unmunge") is None:
        return checks.munge(False, "munge/unmunge not found on PATH")
    socket = _munge_socket()
    code, cred = _run(["munge", "-n", *socket])
    if code != 0:
        return checks.munge(False, f"munge -n failed: {cred[:200]}")
    code, out = _run(["unmunge", *socket], stdin=cred.encode())
    return checks.munge(code == 0, "a credential made and decoded" if code == 0 else out[:200])


def _systemd(environ: Mapping[str, str]) -> Finding:
    runtime = environ.get("XDG_RUNTIME_DIR") or f"/run/user/{os.getuid()}"
    manager = Path(runtime, "systemd", "private").exists()
    linger_dir = Path("/var/lib/systemd/linger")
    linger = (linger_dir / getpass.getuser()).exists() if linger_dir.is_dir() else None
    return checks.systemd(manager, linger)


def _slack(settings: Settings, environ: Mapping[str, str]) -> Finding:
    s = settings.slack
    if s.mode == "off":
        return checks.slack("off", None, "")
    try:
        s.secrets(environ)
    except EnvFileError as exc:
        return checks.slack(s.mode, False, f"slack.token_file: {exc}")
    if s.mode == "webhook":
        ok = bool(s.resolved_webhook_url(environ))
        return checks.slack("webhook", ok, "webhook URL set" if ok else "no webhook URL (SLACK_WEBHOOK_URL)")
    token = s.resolved_bot_token(environ)
    if not token:
        return checks.slack(s.mode, False, f"no bot token ({s.bot_token_env})")
    try:
        resp = WebClient(token=token, base_url=s.base_url, timeout=int(PROBE_TIMEOUT_S)).auth_test()
    except SlackApiError as exc:
        return checks.slack(s.mode, False, f"auth.test refused the token: {exc.response.get('error')}")
    except Exception as exc:  # network errors of every kind: this host cannot reach Slack
        return checks.slack(s.mode, False, f"auth.test failed: {type(exc).__name__}: {exc}")
    return checks.slack(s.mode, True, f"auth.test ok: {resp.get('user')} in {resp.get('team')}")


async def run_doctor(
    settings: Settings,
    *,
    environ: Mapping[str, str] | None = None,
    min_free_bytes: int = 1_000_000_000,
    max_skew_s: float = 5.0,
) -> list[Finding]:
    env = os.environ if environ is None else environ
    slurm = SlurmClient(
        timeout_s=min(PROBE_TIMEOUT_S, settings.slurm.command_timeout_s), bin_dir=settings.slurm.bin_dir
    )
    path = str(settings.slurm.bin_dir) if settings.slurm.bin_dir else env.get("PATH")
    found = {c: shutil.which(c, path=path) for c in checks.SLURM_COMMANDS}
    out: list[Finding] = []
    version = None
    if all(found.values()):
        try:
            version = await slurm.version()
        except SlurmError:
            version = None
    out.append(checks.slurm_commands(found, version))
    try:
        out.append(checks.controller(True, await slurm.ping()))
        reachable = True
    except SlurmError as exc:
        out.append(checks.controller(False, str(exc)))
        reachable = False
    if reachable:
        try:
            await slurm.sacct(["1"])
            out.append(checks.accounting(True, slurm.has_accounting is False, "sacct answers (slurmdbd)"))
        except SlurmError as exc:
            out.append(checks.accounting(False, False, str(exc)))
    out.append(await anyio.to_thread.run_sync(_munge))
    for label, p in (("root", settings.root), ("state", settings.state_dir)):
        fs = detect_fs(p)
        out.append(checks.filesystem(label, str(p), fs.name, fs.shared, fs.name in VOLATILE))
    out.append(
        checks.permissions(
            queue_dir_problem(settings.queue_dir) or _root_problem(settings.root), str(settings.root)
        )
    )
    modes = {}
    for d in (settings.queue_dir, settings.runs_dir):
        modes[str(d)] = "poll" if settings.watch.force_polling or detect_fs(d).shared else "inotify"
    out.append(checks.watching(modes))
    out.append(await anyio.to_thread.run_sync(_slack, settings, env))
    out.append(_systemd(env))
    usage_at = settings.state_dir if settings.state_dir.exists() else settings.root
    free = shutil.disk_usage(usage_at if usage_at.exists() else Path.home()).free
    out.append(checks.disk(free, str(usage_at), min_free_bytes))
    if reachable:
        try:
            before = time.time()
            ctl = await slurm.controller_time()
            skew = (before + time.time()) / 2 - ctl
            out.append(checks.clock_skew(skew, "", max_skew_s + 1.0))  # sdiag has a resolution of 1 s
        except (SlurmError, ValueError) as exc:
            out.append(checks.clock_skew(None, str(exc), max_skew_s))
    else:
        out.append(checks.clock_skew(None, "the controller does not answer", max_skew_s))
    try:
        out.append(checks.lease(describe(read_lease(settings.lease_dir), time.time())))
    except OSError as exc:
        out.append(
            Finding("lease", "fail", f"cannot read {settings.lease_dir}: {exc}", "check the state dir")
        )
    return out


def _root_problem(root: Path) -> str | None:
    try:
        mode = root.stat().st_mode
    except FileNotFoundError:
        return None
    if mode & 0o022:
        return f"{root} is writable by group or others (mode {mode & 0o777:o}): they could change your runs"
    return None
