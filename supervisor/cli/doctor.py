"""`shepherd doctor`: check this machine for running shepherd (Slurm, munge, filesystems, Slack, systemd,
disk, clock) and print what to fix."""

from __future__ import annotations

import argparse

import anyio

from supervisor.cli.common import EXIT_ERROR, AddCommand, settings_of
from supervisor.doctor.checks import as_json, table
from supervisor.doctor.probes import run_doctor


def register(add: AddCommand) -> None:
    d = add("doctor", cmd_doctor, "check the environment and say how to fix each problem")
    d.add_argument("--json", action="store_true", help="one object per check, for scripts")
    d.add_argument("--min-free-gb", type=float, default=1.0, help="less free disk than this fails")
    d.add_argument("--max-skew-s", type=float, default=5.0, help="more clock skew than this fails")


def cmd_doctor(args: argparse.Namespace) -> int:
    settings = settings_of(args)
    findings = anyio.run(
        lambda: run_doctor(settings, min_free_bytes=int(args.min_free_gb * 1e9), max_skew_s=args.max_skew_s)
    )
    print(as_json(findings) if args.json else table(findings))
    return EXIT_ERROR if any(f.status == "fail" for f in findings) else 0
