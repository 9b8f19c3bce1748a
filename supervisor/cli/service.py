"""`shepherd daemon` and `shepherd service install`: running the supervisor, by hand or under systemd."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import anyio

from supervisor.cli.common import EXIT_ERROR, AddCommand, needs_subcommand, settings_of
from supervisor.daemon.compose import run_daemon
from supervisor.service.install import InstallError, default_exe, install_unit
from supervisor.service.slurm_host import (
    SlurmHosting,
    hosted_environment,
    hosting_problem,
    install_slurm_job,
    job_name,
    render_scrontab,
)
from supervisor.slurm.client import SlurmClient, SlurmError


def register(add: AddCommand) -> None:
    d = add("daemon", cmd_daemon, "run the supervisor daemon")
    d.add_argument("--log-format", choices=["auto", "json", "pretty"], default="auto")
    svc = add("service", needs_subcommand, "install the systemd unit")
    ssub = svc.add_subparsers(dest="service_command", required=True)
    ins = ssub.add_parser("install", help="write the unit file and print the steps to enable it")
    ins.add_argument("--system", action="store_true", help="a system unit run as a service account")
    ins.add_argument("--user-name", default=None, help="the service account (system unit)")
    ins.add_argument("--env-file", default=None, help="file with secrets (mode 0600), e.g. SLACK tokens")
    ins.add_argument("--dest", default=None, help="write the unit here instead of the systemd folder")
    ins.add_argument("--slurm", action="store_true", help="host the daemon as a small Slurm job instead")
    ins.add_argument("--scrontab", action="store_true", help="print `scrontab` lines that host the daemon")
    ins.add_argument("--partition", default=None)
    ins.add_argument("--qos", default=None)
    ins.add_argument("--account", default=None)
    ins.add_argument("--time", default="1-00:00:00", help="the daemon job's time limit; it restarts after")
    ins.add_argument("--stop-grace", type=int, default=120, help="SIGTERM this many s before the limit")
    ins.add_argument("--restart-delay", type=int, default=60, help="a successor starts no sooner than this")
    ins.set_defaults(func=cmd_service_install)


def cmd_daemon(args: argparse.Namespace) -> int:
    return run_daemon(settings_of(args), log_format=args.log_format)


def cmd_service_install(args: argparse.Namespace) -> int:
    settings = settings_of(args)
    if args.slurm or args.scrontab:
        problem = hosting_problem(settings.slack, os.environ)
        if problem is not None:
            print(f"shepherd: {problem}", file=sys.stderr)
            return EXIT_ERROR
        env = hosted_environment(os.environ, settings.slack)
        return _install_on_slurm(args, settings.root.resolve(), settings.slurm.bin_dir, env)
    try:
        text = install_unit(
            "system" if args.system else "user",
            settings.root.resolve(),
            env_file=Path(args.env_file).resolve() if args.env_file else None,
            user=args.user_name,
            dest=Path(args.dest) if args.dest else None,
        )
    except InstallError as exc:
        print(f"shepherd: {exc}", file=sys.stderr)
        return EXIT_ERROR
    print(text)
    return 0


def _install_on_slurm(args: argparse.Namespace, root: Path, bin_dir: Path | None, env: dict[str, str]) -> int:
    try:
        hosting = SlurmHosting(
            partition=args.partition,
            qos=args.qos,
            account=args.account,
            time=args.time,
            stop_grace_s=args.stop_grace,
            restart_delay_s=args.restart_delay,
        )
        exe = default_exe()
        if args.scrontab:
            print(render_scrontab(exe, root, hosting), end="")
            print("# add these lines with `scrontab -e` (your site must enable scrontab)", file=sys.stderr)
            return 0
        script, job = anyio.run(
            lambda: install_slurm_job(exe, root, hosting, SlurmClient(bin_dir=bin_dir), env)
        )
    except (InstallError, ValueError, SlurmError) as exc:
        print(f"shepherd: {exc}", file=sys.stderr)
        return EXIT_ERROR
    name = job_name(root)
    print(f"Wrote {script}")
    print(
        f"Submitted the daemon as job {job}"
        if job
        else f"A daemon job named {name} is already queued or running"
    )
    print(
        f"Logs: {root}/service/daemon-<jobid>.log; stop it (and its queued successor): scancel --name={name}"
    )
    return 0
