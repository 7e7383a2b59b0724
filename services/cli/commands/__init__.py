"""Client commands of `converge`: each module registers its argparse subcommands.

`main` builds the parser from `register` functions here (each adds commands
to the groups it needs: `stack`, `resource`, ...), resolves the endpoint and
runs the chosen handler with a `Context`: the API client, the console streams
and how to print, plus the clock and sleep used for polling (injected, so
nothing here reaches for globals). A handler returns the exit code; expected
failures raise `CliError`.

The connection options (`--url`, `--token`, `--project`) are taken before the
command and after it alike (as `openstack --os-... stack list`): both parsers
know them, with no default, so neither overwrites what the other was given.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TextIO, TypeAlias

from services.cli.client import ApiClient, segment
from services.cli.output import Format, Output

POLL_SECONDS = 0.5  # between status polls of --wait and --follow: snappy, and cheap for the API


@dataclass(frozen=True)
class Console:
    out: TextIO
    err: TextIO
    live: bool = False  # err is a terminal: progress rewrites one line in place
    confirm: Callable[[str], bool] = field(default=lambda _question: True)


@dataclass(frozen=True)
class Context:
    api: ApiClient
    console: Console
    output: Output
    poll_seconds: float = POLL_SECONDS
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep

    def print(self, text: str) -> None:
        if text:
            print(text, file=self.console.out, flush=True)

    async def pause(self) -> None:
        await self.sleep(self.poll_seconds)


Handler = Callable[[argparse.Namespace, Context], Awaitable[int]]
Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


#: The command groups and what each is for, in the order `converge --help` lists them.
GROUPS = {
    "stack": "create, update, delete, inspect and act on stacks",
    "resource": "inspect a stack's resources, signal them, mark them unhealthy",
    "output": "read a stack's outputs",
    "event": "read a stack's events",
    "template": "check templates",
    "observe": "watch a stack's real resources for drift",
    "software": "software configs and deployments (as `openstack software config|deployment ...`)",
}


class Groups:
    """The `converge GROUP ACTION` parsers: `groups("stack")` is where `stack` actions go."""

    def __init__(self, commands: Subparsers) -> None:
        self._commands = commands
        self._groups: dict[str, Subparsers] = {}
        self.common = client_options()

    def __call__(self, name: str) -> Subparsers:
        if name not in self._groups:
            group = self._commands.add_parser(name, help=GROUPS[name], description=GROUPS[name])
            group.set_defaults(parser=group)
            self._groups[name] = group.add_subparsers(dest="action", required=True, metavar="ACTION")
        return self._groups[name]

    def command(self, group: str, name: str, handler: Handler, *, help: str) -> argparse.ArgumentParser:
        return command(self(group), name, handler, help=help, common=self.common)


def connection_options(parser: argparse.ArgumentParser) -> None:
    """--url, --token and --project, with no default (see the module's docstring)."""
    group = parser.add_argument_group("connection")
    group.add_argument(
        "--url",
        default=argparse.SUPPRESS,
        help="API URL without /v1 (default: CONVERGE_URL, the URL in credentials.json, "
        "else http://127.0.0.1:8004)",
    )
    group.add_argument(
        "--token", default=argparse.SUPPRESS, help="auth token (default: CONVERGE_TOKEN or credentials.json)"
    )
    group.add_argument(
        "--project",
        default=argparse.SUPPRESS,
        help="project id (default: CONVERGE_PROJECT or credentials.json)",
    )


def client_options() -> argparse.ArgumentParser:
    """Options every client command takes (a parent parser)."""
    common = argparse.ArgumentParser(add_help=False)
    connection_options(common)
    group = common.add_argument_group("output")
    group.add_argument(
        "-f", "--format", dest="fmt", choices=[f.value for f in Format], default=Format.TABLE.value
    )
    group.add_argument(
        "-c", "--column", dest="columns", action="append", default=[], help="show only this column (repeat)"
    )
    return common


def command(
    parent: Subparsers, name: str, handler: Handler, *, help: str, common: argparse.ArgumentParser
) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = parent.add_parser(name, help=help, description=help, parents=[common])
    parser.set_defaults(handler=handler, parser=parser)
    return parser


async def find_stack(ctx: Context, name_or_id: str) -> dict[str, Any]:
    """The stack's detail (the API redirects a bare name or id to its canonical URL)."""
    answer = await ctx.api.get(f"stacks/{segment(name_or_id)}")
    return dict(answer["stack"])


def stack_path(stack: dict[str, Any]) -> str:
    """The canonical `stacks/NAME/ID` path, so later calls need no redirect."""
    return f"stacks/{segment(stack['stack_name'])}/{segment(stack['id'])}"
