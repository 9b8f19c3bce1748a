"""`shepherd service install`: write a systemd unit with this machine's paths and say how to enable it.

The unit texts live here (and, identical, in the repository's `systemd/` folder
for people who read or copy them; a test keeps the two in sync) so that a
wheel install needs no data files. Placeholders look like ``@EXE@``, which no
systemd syntax uses, and are filled in by `render_unit`.

What a unit needs from the install machine, and why it is captured now:
- the `shepherd` executable of *this* venv (systemd has no venv activation);
- the state root, absolute (the unit has no $HOME expansion for --root);
- PATH with the folder that holds `sbatch` (sites install Slurm in /opt/...,
  reached through modules a unit never loads) and SLURM_CONF if set.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

UnitKind = Literal["user", "system"]

UNIT_NAME = "shepherd.service"

_COMMON_SERVICE = """\
[Service]
# READY=1 is sent only after state is loaded and reconciled with Slurm; the
# daemon sends EXTEND_TIMEOUT_USEC while it waits for an unreachable slurmctld.
Type=notify
NotifyAccess=main
ExecStart=@EXEC_START@
ExecReload=/bin/kill -HUP $MAINPID
@ENVIRONMENT@
# WATCHDOG=1 comes every 30 s only while every daemon loop makes progress; a
# wedged loop (hung squeue, deadlocked tailer) gets the daemon killed and restarted.
WatchdogSec=60
Restart=on-failure
RestartSec=10
TimeoutStartSec=15min
# SIGTERM to the daemon first (it sends STOPPING=1, closes the store), SIGKILL
# to leftovers (a hung sbatch) after the timeout. Training jobs run under
# slurmd, not in this cgroup: stopping the daemon never stops a run.
KillMode=mixed
TimeoutStopSec=30
UMask=0077
SyslogIdentifier=shepherd

# --- hardening that still lets sbatch/squeue/scancel work ---
# No setuid helpers, no new privileges for anything the daemon starts.
NoNewPrivileges=yes
# seccomp: only syscalls ordinary services use; a blocked call fails with EPERM
# instead of killing the daemon.
SystemCallArchitectures=native
SystemCallFilter=@system-service
SystemCallErrorNumber=EPERM
# AF_UNIX: munge socket (/run/munge) and the notify socket; AF_INET/AF_INET6:
# slurmctld (remote) and Slack; AF_NETLINK: interface lookups done by libc/Slurm.
RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6 AF_NETLINK
RestrictNamespaces=yes
RestrictRealtime=yes
RestrictSUIDSGID=yes
LockPersonality=yes
# Not set, on purpose:
# - PrivateNetwork / IPAddressDeny: slurmctld and Slack are remote.
# - MemoryDenyWriteExecute: ctypes/libffi callbacks (used by dependencies)
#   need writable+executable trampolines on some platforms.
"""

USER_TEMPLATE = (
    """\
# Shepherd, as a user service: `systemctl --user`, kept running after logout by
# `loginctl enable-linger $USER`. Written by `shepherd service install`; the
# @...@ placeholders are filled in then.
#
# Filesystem sandboxing (ProtectSystem=, PrivateTmp=, ProtectHome=, ...) is
# deliberately absent: in a user manager it only works together with
# PrivateUsers=true (systemd.exec(5)), which runs the daemon in a user
# namespace where every other uid/gid is "nobody" and which many HPC sites
# disable (user.max_user_namespaces=0). munge authenticates sbatch by uid and
# Slurm resolves the user's groups; we do not risk either for a process that
# already runs as the user and only holds the user's own rights. The
# seccomp-based options below work unprivileged and are kept.
[Unit]
Description=Shepherd: supervisor for GRPO training runs on Slurm
StartLimitIntervalSec=600
StartLimitBurst=5

"""
    + _COMMON_SERVICE
    + """
[Install]
WantedBy=default.target
"""
)

SYSTEM_TEMPLATE = (
    """\
# Shepherd, as a system service running as a dedicated account (User=).
# Written by `shepherd --root ROOT service install --system --user-name NAME`;
# the @...@ placeholders are filled in then.
[Unit]
Description=Shepherd: supervisor for GRPO training runs on Slurm
Wants=network-online.target
After=network-online.target remote-fs.target munge.service
StartLimitIntervalSec=600
StartLimitBurst=5

"""
    + _COMMON_SERVICE.replace(
        "[Service]\n",
        """[Service]
User=@USER@
""",
    )
    + """\
# The whole filesystem read-only except the state root (store, queue, runs).
# Read-only mounts do not stop connecting to AF_UNIX sockets, so munge's
# /run/munge socket still works; it is listed anyway in case a site's munge
# needs it (the "-" ignores it where absent).
ProtectSystem=strict
ReadWritePaths=@ROOT@
ReadWritePaths=-/run/munge
# Users' training logs and checkpoints may live in /home: readable, not writable.
# (ProtectHome=yes would hide them, and the state root itself may be there.)
ProtectHome=read-only
PrivateTmp=yes
PrivateMounts=yes
# The daemon uses no devices (GPUs are used by jobs on compute nodes).
PrivateDevices=yes
ProtectKernelTunables=yes
ProtectKernelModules=yes
ProtectKernelLogs=yes
ProtectControlGroups=yes
ProtectClock=yes
ProtectHostname=yes
ProtectProc=invisible
RemoveIPC=yes
CapabilityBoundingSet=
AmbientCapabilities=
# Not set: SystemCallFilter=~@resources (glibc's getrlimit is prlimit64, which
# sbatch needs to propagate limits); PrivateUsers= (would show every other uid as "nobody" and put munge's
# uid-based authentication of sbatch at risk for no gain: the account has no
# privileges to drop).

[Install]
WantedBy=multi-user.target
"""
)

TEMPLATES: dict[UnitKind, str] = {"user": USER_TEMPLATE, "system": SYSTEM_TEMPLATE}

# Folders every service PATH should end with (systemd's default for services).
_BASE_PATH = ("/usr/local/bin", "/usr/bin", "/bin")
# Environment worth carrying from the installing shell into the unit.
_CARRIED_ENV = ("SLURM_CONF",)


class InstallError(Exception):
    """The unit cannot be written as asked (bad path, missing executable, no user)."""


_UNSAFE = re.compile(r"[\x00-\x1f\x7f\"\\]")


def _unit_path_arg(path: Path | str) -> str:
    """A path as one unit-file word: %-escaped, quoted if it has spaces; refuse what cannot be quoted."""
    text = str(path)
    if _UNSAFE.search(text):
        raise InstallError(f"path contains characters a unit file cannot hold: {text!r}")
    text = text.replace("%", "%%").replace("$", "$$")
    return f'"{text}"' if " " in text else text


def _env_assignment(key: str, value: str) -> str:
    if _UNSAFE.search(value) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
        raise InstallError(f"cannot write environment variable {key!r} into a unit")
    value = value.replace("%", "%%").replace("$", "$$")
    return f'Environment="{key}={value}"'


def _service_path(exe: Path, sbatch: Path | None) -> str:
    dirs: list[str] = [str(exe.parent)]
    if sbatch is not None:
        dirs.append(str(sbatch.parent))
    for d in _BASE_PATH:
        if d not in dirs:
            dirs.append(d)
    return ":".join(dirs)


def render_unit(
    kind: UnitKind,
    exe: Path,
    root: Path,
    env_file: Path | None = None,
    user: str | None = None,
    *,
    sbatch: Path | None = None,
    extra_env: Mapping[str, str] | None = None,
) -> str:
    """The unit text for `kind` with real paths. Pure: reads no environment and touches no file."""
    if kind not in TEMPLATES:
        raise InstallError(f"unknown unit kind {kind!r} (user or system)")
    if not exe.is_absolute() or not root.is_absolute():
        raise InstallError("the executable and the state root must be absolute paths")
    if kind == "system" and not user:
        raise InstallError("a system unit needs the service account's user name (--user-name)")
    if user is not None and not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]*\$?", user):
        raise InstallError(f"not a valid user name: {user!r}")

    exec_start = " ".join(
        [_unit_path_arg(exe), "--root", _unit_path_arg(root), "daemon", "--log-format", "auto"]
    )
    env_lines = [
        _env_assignment("PATH", _service_path(exe, sbatch)),
        _env_assignment("PYTHONUNBUFFERED", "1"),
    ]
    for key, value in sorted((extra_env or {}).items()):
        env_lines.append(_env_assignment(key, value))
    if env_file is not None:
        if not env_file.is_absolute():
            raise InstallError("the environment file must be an absolute path")
        env_lines.append("# Secrets (Slack tokens) live here, mode 0600; never in the unit itself.")
        env_lines.append(f"EnvironmentFile={_unit_path_arg(env_file)}")

    text = TEMPLATES[kind]
    text = text.replace("@EXEC_START@", exec_start)
    text = text.replace("@ENVIRONMENT@", "\n".join(env_lines))
    text = text.replace("@ROOT@", _unit_path_arg(root))
    text = text.replace("@USER@", user or "")
    return text


def unit_path(kind: UnitKind, home: Path | None = None, env: Mapping[str, str] | None = None) -> Path:
    """Where the unit goes: the user's systemd config folder, or /etc/systemd/system."""
    if kind == "system":
        return Path("/etc/systemd/system") / UNIT_NAME
    env = os.environ if env is None else env
    config = env.get("XDG_CONFIG_HOME")
    base = Path(config) if config else (home or Path(env.get("HOME") or Path.home())) / ".config"
    return base / "systemd" / "user" / UNIT_NAME


def default_exe() -> Path:
    """The `shepherd` script next to this interpreter (the venv's bin/), else the one on PATH."""
    candidate = Path(sys.executable).parent / "shepherd"
    if candidate.exists():
        return candidate.absolute()
    found = shutil.which("shepherd")
    if found:
        return Path(found).absolute()
    raise InstallError("cannot find the `shepherd` executable: pass exe= (is the package installed?)")


def next_steps(kind: UnitKind, path: Path, user: str | None) -> str:
    """What the operator runs next: reload, enable, linger (user) or the system equivalents."""
    if kind == "system":
        return "\n".join(
            [
                f"Wrote {path}",
                "Enable and start it:",
                "  systemctl daemon-reload && systemctl enable --now shepherd",
                "Check it:",
                "  systemctl status shepherd",
                "  journalctl -u shepherd -f",
                f"The daemon runs as {user}: that account submits the jobs, so it needs a working",
                "Slurm/munge login and read access to the runs' log folders.",
            ]
        )
    name = user or _current_user()
    return "\n".join(
        [
            f"Wrote {path}",
            "Enable and start it:",
            "  systemctl --user daemon-reload && systemctl --user enable --now shepherd",
            "Keep it running after you log out (needed on login nodes):",
            f"  loginctl enable-linger {name}",
            "Check it:",
            "  systemctl --user status shepherd",
            "  journalctl --user -u shepherd -f",
        ]
    )


def _current_user() -> str:
    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        return os.environ.get("USER", "$USER")


@dataclass(frozen=True)
class Installed:
    path: Path
    text: str
    instructions: str


def install_unit(
    kind: UnitKind,
    root: Path,
    *,
    exe: Path | None = None,
    env_file: Path | None = None,
    user: str | None = None,
    home: Path | None = None,
    env: Mapping[str, str] | None = None,
    dest: Path | None = None,
) -> str:
    """Write the unit and return the text to print (the enable/linger steps)."""
    return install_unit_details(
        kind, root, exe=exe, env_file=env_file, user=user, home=home, env=env, dest=dest
    ).instructions


def install_unit_details(
    kind: UnitKind,
    root: Path,
    *,
    exe: Path | None = None,
    env_file: Path | None = None,
    user: str | None = None,
    home: Path | None = None,
    env: Mapping[str, str] | None = None,
    dest: Path | None = None,
) -> Installed:
    """install_unit, also returning the path and unit text (for tests and `--dry-run` style callers)."""
    env = os.environ if env is None else env
    exe = (exe or default_exe()).absolute()
    if not exe.exists():
        raise InstallError(f"executable not found: {exe}")
    root = root.expanduser().absolute()
    if env_file is not None:
        env_file = env_file.expanduser().absolute()
    sbatch_found = shutil.which("sbatch", path=env.get("PATH"))
    extra_env = {k: env[k] for k in _CARRIED_ENV if env.get(k)}
    text = render_unit(
        kind,
        exe,
        root,
        env_file,
        user,
        sbatch=Path(sbatch_found) if sbatch_found else None,
        extra_env=extra_env,
    )
    path = dest or unit_path(kind, home=home, env=env)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.chmod(0o644)
    tmp.replace(path)
    return Installed(path=path, text=text, instructions=next_steps(kind, path, user))
