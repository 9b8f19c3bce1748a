"""Each doctor check as a pure function from what a probe found to a finding (status, detail, fix).

Keeping the judgements pure lets every check be made to fail in a unit test without breaking a cluster; the
probes that gather the facts are in `probes.py`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Literal

Status = Literal["ok", "warn", "fail", "skip"]
SLURM_COMMANDS = ("sbatch", "squeue", "sacct", "scancel", "scontrol", "sinfo")


@dataclass(frozen=True, slots=True)
class Finding:
    check: str
    status: Status
    detail: str
    fix: str = ""


def slurm_commands(found: Mapping[str, str | None], version: str | None) -> Finding:
    missing = [c for c in SLURM_COMMANDS if not found.get(c)]
    if missing:
        return Finding(
            "slurm commands",
            "fail",
            f"not found on PATH: {', '.join(missing)}",
            "load Slurm (`module load slurm`) or set slurm.bin_dir in shepherd.toml",
        )
    return Finding("slurm commands", "ok", f"{version or 'version unknown'} in {found['sbatch']}")


def controller(ok: bool, detail: str) -> Finding:
    if ok:
        return Finding("controller", "ok", detail)
    return Finding(
        "controller",
        "fail",
        detail,
        "check SLURM_CONF and that slurmctld runs (`scontrol ping`); ask your admins",
    )


def accounting(ok: bool, jobcomp_only: bool, detail: str) -> Finding:
    if ok and not jobcomp_only:
        return Finding("accounting (sacct)", "ok", detail)
    if ok:
        return Finding(
            "accounting (sacct)",
            "warn",
            "no slurmdbd: exit codes come from the jobcomp file (`sacct -c`)",
            "fine for a small cluster; with slurmdbd the daemon also finds jobs after slurmctld forgets them",
        )
    return Finding(
        "accounting (sacct)", "fail", detail, "ask your admins whether slurmdbd is up (`sacct -X`)"
    )


def munge(ok: bool, detail: str) -> Finding:
    if ok:
        return Finding("munge", "ok", detail)
    return Finding("munge", "fail", detail, "start munged or check MUNGE's socket (`munge -n | unmunge`)")


def filesystem(label: str, path: str, fs: str, shared: bool, volatile: bool) -> Finding:
    check = f"filesystem: {label}"
    if volatile:
        return Finding(
            check, "fail", f"{path} is on {fs}: lost at reboot", "put the root on a disk that survives"
        )
    if label == "state" and not shared:
        return Finding(
            check,
            "warn",
            f"{path} is on {fs}, local to this login node: a daemon on another login node cannot take "
            "over, and the state is lost if this node is wiped",
            "put the root in your shared home (--root ~/shepherd) so any login node can carry on",
        )
    mode = "rollback journal, one writer by lease" if shared else "WAL"
    extra = f"; store: {mode}" if label == "state" else ""
    return Finding(check, "ok", f"{path}: {fs} ({'shared' if shared else 'local'}){extra}")


def permissions(problem: str | None, root: str) -> Finding:
    if problem is None:
        return Finding("permissions", "ok", f"{root} and its queue are private to you")
    return Finding("permissions", "fail", problem, "chmod go-w on the folder named, and own it yourself")


def watching(modes: Mapping[str, str]) -> Finding:
    polled = [p for p, m in modes.items() if m == "poll"]
    detail = "; ".join(f"{p}: {m}" for p, m in modes.items())
    if polled:
        return Finding(
            "file watching",
            "ok",
            detail + " (polled: inotify does not see writes made by other hosts on network filesystems)",
        )
    return Finding("file watching", "ok", detail)


def slack(mode: str, ok: bool | None, detail: str) -> Finding:
    if mode == "off":
        return Finding("slack", "skip", "slack.mode is off: notices go to the log only")
    if ok:
        return Finding("slack", "ok", detail)
    return Finding(
        "slack", "fail", detail, "check the token (SLACK_BOT_TOKEN) and that this host reaches Slack"
    )


def systemd(user_manager: bool, linger: bool | None) -> Finding:
    if not user_manager:
        return Finding(
            "systemd --user",
            "warn",
            "no systemd user manager here",
            "host the daemon as a Slurm job: `shepherd service install --slurm` (docs/operation.md)",
        )
    if linger is False:
        return Finding(
            "systemd --user",
            "warn",
            "lingering is off: your user manager, and shepherd, stop when you log out",
            "`loginctl enable-linger $USER`, or `shepherd service install --slurm` where it is not allowed",
        )
    return Finding("systemd --user", "ok", "user manager running" + (", linger on" if linger else ""))


def disk(free_bytes: int, path: str, min_free_bytes: int) -> Finding:
    free_gb = free_bytes / 1e9
    if free_bytes < min_free_bytes:
        return Finding(
            "disk space",
            "fail",
            f"{free_gb:.2f} GB free under {path}",
            "free space: the store stops writing when full",
        )
    return Finding("disk space", "ok", f"{free_gb:.1f} GB free under {path}")


def clock_skew(skew_s: float | None, detail: str, max_skew_s: float) -> Finding:
    if skew_s is None:
        return Finding("clock skew", "skip", f"controller time not known: {detail}")
    if abs(skew_s) > max_skew_s:
        return Finding(
            "clock skew",
            "fail",
            f"this host's clock is {skew_s:+.1f} s from the controller's",
            "enable NTP (chronyd/timesyncd): Slurm's times and the daemon's grace periods assume one clock",
        )
    return Finding("clock skew", "ok", f"{skew_s:+.1f} s from the controller")


def lease(line: str) -> Finding:
    return Finding("lease", "ok", line)


def table(findings: Sequence[Finding]) -> str:
    """A plain-text table: check, status, detail, then the fix indented under it."""
    width = max((len(f.check) for f in findings), default=10)
    lines = [f"{'CHECK':<{width}}  STATUS  DETAIL"]
    for f in findings:
        lines.append(f"{f.check:<{width}}  {f.status.upper():<6}  {f.detail}")
        if f.fix and f.status in ("warn", "fail"):
            lines.append(f"{'':<{width}}          fix: {f.fix}")
    return "\n".join(lines)


def as_json(findings: Sequence[Finding]) -> str:
    return json.dumps([asdict(f) for f in findings], indent=2)
