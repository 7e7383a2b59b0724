"""`converge`: the user and operator command line.

    converge up                       run every service in one process on embedded defaults
    converge stack|resource|event|output|observe|template ...
                                      client commands against the API (see `commands/`)

This module only wires argparse and runs the chosen command: `up` is
imported when asked for (it composes the services); the client commands
talk HTTP only. Expected failures print one line to stderr and exit 1;
Ctrl-C exits 130.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys

from services.cli.client import ApiClient, CliError
from services.cli.commands import Console, Context, Handler, catalog, details, stacks
from services.cli.config import resolve_endpoint
from services.cli.output import Format, Output


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="converge", description="Converge orchestration engine")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    commands.add_parser("up", help="run engine, worker and observer in one process (embedded defaults)")
    for module in (stacks, details, catalog):
        module.register(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "up":
        return run_up()
    try:
        return asyncio.run(run_client(args.handler, args))
    except CliError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(file=sys.stderr)
        return 130


async def run_client(handler: Handler, args: argparse.Namespace) -> int:
    endpoint = resolve_endpoint(url=args.url, token=args.token, project=args.project, env=os.environ)
    console = Console(out=sys.stdout, err=sys.stderr, live=sys.stderr.isatty(), confirm=_confirm)
    output = Output(Format(args.fmt), tuple(args.columns))
    async with ApiClient.open(endpoint) as api:
        return await handler(args, Context(api=api, console=console, output=output))


def _confirm(question: str) -> bool:
    """Ask on a terminal; scripts (stdin not a TTY) are not asked, as with `openstack`."""
    if not sys.stdin.isatty():
        return True
    return input(question).strip().lower() in ("y", "yes")


def run_up() -> int:
    from services.cli.up import up
    from shared.logging import configure_logging
    from shared.service import run_service
    from shared.settings import UpSettings, load_settings

    settings = load_settings(UpSettings, program="converge up")
    configure_logging(level=settings.log_level, fmt=settings.log_format)
    return run_service(lambda stop: up(settings, stop), name="up")


if __name__ == "__main__":
    sys.exit(main())
