"""`python -m trainer --config FILE [key=value ...] [--resume-from PATH]`, exiting 2 on a bad config before
torch or Ray is even imported."""

from __future__ import annotations

import argparse
import importlib.util
import logging
import sys

import structlog

from trainer.config import ConfigError, load_config, missing_packages


def _configure_logging() -> None:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(message)s")
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="%Y-%m-%d %H:%M:%S"),
            structlog.dev.ConsoleRenderer(colors=False),
        ],
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainer", description="Shepherd's Ray GRPO trainer")
    parser.add_argument("--config", help="YAML config file")
    parser.add_argument("--resume-from", help="resume from this checkpoint dir (default: newest step_N)")
    parser.add_argument("overrides", nargs="*", help="dotted overrides, e.g. grpo.max_num_steps=50")
    # Intermixed: launchers append overrides after `--resume-from PATH` (Shepherd's deadline on a resume),
    # which plain parse_args refuses once the positional list has been consumed.
    args = parser.parse_intermixed_args(argv)
    _configure_logging()
    try:
        cfg = load_config(args.config, args.overrides)
    except ConfigError as e:
        print(f"config error: {e}", file=sys.stderr)
        return 2
    missing = missing_packages(cfg, lambda name: importlib.util.find_spec(name) is not None)
    for problem in missing:
        print(f"config error: {problem}", file=sys.stderr)
    if missing:
        return 2
    from trainer.driver import run

    return run(cfg, args.resume_from)


if __name__ == "__main__":
    sys.exit(main())
