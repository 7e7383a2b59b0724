"""Client commands of `converge`: each module registers its argparse subcommands.

`main` builds the parser from `register` functions here, resolves the
endpoint and runs the chosen handler with a `Context`: the API client, the
console streams and how to print, plus the clock and sleep used for polling
(injected, so nothing here reaches for globals). A handler returns the exit
code; expected failures raise `CliError`.
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


def client_options() -> argparse.ArgumentParser:
    """Options every client command takes (a parent parser)."""
    common = argparse.ArgumentParser(add_help=False)
    group = common.add_argument_group("connection and output")
    group.add_argument("--url", help="API URL without /v1 (default: CONVERGE_URL or http://127.0.0.1:8004)")
    group.add_argument("--token", help="auth token (default: CONVERGE_TOKEN or credentials.json)")
    group.add_argument("--project", help="project id (default: CONVERGE_PROJECT or credentials.json)")
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
    parser.set_defaults(handler=handler)
    return parser


async def find_stack(ctx: Context, name_or_id: str) -> dict[str, Any]:
    """The stack's detail (the API redirects a bare name or id to its canonical URL)."""
    answer = await ctx.api.get(f"stacks/{segment(name_or_id)}")
    return dict(answer["stack"])


def stack_path(stack: dict[str, Any]) -> str:
    """The canonical `stacks/NAME/ID` path, so later calls need no redirect."""
    return f"stacks/{segment(stack['stack_name'])}/{segment(stack['id'])}"
