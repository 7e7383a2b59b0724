"""`converge`: the user and operator command line.

    converge up [--port PORT] [--data-dir DIR]
                                      run every service in one process on embedded defaults
    converge [--url URL] [--token TOKEN] [--project ID] stack|resource|event|output|observe|template ...
                                      client commands against the API (see `commands/`)

This module only wires argparse and runs the chosen command. As with
`openstack`, the connection options go before or after the command; an
option the command does not know gets that command's own usage. `up` is
started through `launch` (which imports the services only then); the client
commands talk HTTP only. Expected failures print one line to stderr and exit
1 (2 for bad usage or a bad setting); Ctrl-C exits 130.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from importlib.metadata import PackageNotFoundError, version

from services.cli import launch
from services.cli.client import ApiClient, CliError
from services.cli.commands import (
    Console,
    Context,
    Groups,
    Handler,
    actions,
    catalog,
    connection_options,
    details,
    hooks,
    software,
    stacks,
)
from services.cli.config import resolve_endpoint
from services.cli.output import Format, Output


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="converge", description="Converge orchestration engine")
    parser.add_argument("--version", action="version", version=f"converge {_version()}")
    connection_options(parser)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    launch.register(commands)
    groups = Groups(commands)
    for module in (stacks, actions, hooks, details, catalog, software):
        module.register(groups)
    return parser


def _version() -> str:
    try:
        return version("converge")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # say it with the usage of the command that was given them
        getattr(args, "parser", parser).error(f"unrecognized arguments: {' '.join(unknown)}")
    if args.command == "up":
        return launch.run(args)
    try:
        return asyncio.run(run_client(args.handler, args))
    except CliError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(file=sys.stderr)
        return 130


async def run_client(handler: Handler, args: argparse.Namespace) -> int:
    endpoint = resolve_endpoint(
        url=getattr(args, "url", None),
        token=getattr(args, "token", None),
        project=getattr(args, "project", None),
        env=os.environ,
    )
    console = Console(out=sys.stdout, err=sys.stderr, live=sys.stderr.isatty(), confirm=_confirm)
    output = Output(Format(args.fmt), tuple(args.columns))
    async with ApiClient.open(endpoint) as api:
        return await handler(args, Context(api=api, console=console, output=output))


def _confirm(question: str) -> bool:
    """Ask on a terminal; scripts (stdin not a TTY) are not asked, as with `openstack`."""
    if not sys.stdin.isatty():
        return True
    return input(question).strip().lower() in ("y", "yes")


if __name__ == "__main__":
    sys.exit(main())
