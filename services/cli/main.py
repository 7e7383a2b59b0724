"""`converge`: the user and operator command line.

    converge up      run every service in one process on embedded defaults

Client commands against the API (`converge stack ...`) join as the API grows.
"""

from __future__ import annotations

import argparse
import sys

from services.cli.up import up
from shared.logging import configure_logging
from shared.service import run_service
from shared.settings import UpSettings, load_settings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="converge", description="Converge orchestration engine")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("up", help="run engine, worker and observer in one process (embedded defaults)")
    parser.parse_args(argv)  # `up` is the only command so far
    settings = load_settings(UpSettings, program="converge up")
    configure_logging(level=settings.log_level, fmt=settings.log_format)
    return run_service(lambda stop: up(settings, stop), name="up")


if __name__ == "__main__":
    sys.exit(main())
