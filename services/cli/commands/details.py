"""What is inside a stack: `converge resource list|show`, `converge output list|show`,
`converge event list`.

All read-only. A stack is named by name or id; the API's redirect to the
canonical URL is followed by the client. `output show --all` shows every
output with its value. `event list --follow` keeps printing new events (see
`waiting.follow_events`) as log lines, or one JSON object / YAML document per
event with `-f json|yaml`; `--limit` and `--marker` page through them.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import yaml

from services.cli.client import CliError, segment
from services.cli.commands import Context, Groups, find_stack, stack_path
from services.cli.commands.waiting import event_line, events_after, follow_events
from services.cli.output import Column, Format

RESOURCE_COLUMNS = [
    Column("Resource Name", "resource_name"),
    Column("Physical Resource ID", "physical_resource_id"),
    Column("Resource Type", "resource_type"),
    Column("Resource Status", "resource_status"),
    Column("Updated Time", "updated_time"),
]
EVENT_COLUMNS = [
    Column("Resource Name", "resource_name"),
    Column("ID", "id"),
    Column("Resource Status", "resource_status"),
    Column("Resource Status Reason", "resource_status_reason"),
    Column("Event Time", "event_time"),
]
OUTPUT_COLUMNS = [Column("Output Key", "output_key"), Column("Description", "description")]


def register(groups: Groups) -> None:
    listing = groups.command("resource", "list", list_resources, help="list a stack's resources")
    listing.add_argument("stack", metavar="STACK")
    show = groups.command("resource", "show", show_resource, help="show one resource")
    show.add_argument("stack", metavar="STACK")
    show.add_argument("resource", metavar="RESOURCE")

    listing = groups.command("output", "list", list_outputs, help="list a stack's outputs")
    listing.add_argument("stack", metavar="STACK")
    show = groups.command("output", "show", show_output, help="show an output and its value (or --all)")
    show.add_argument("stack", metavar="STACK")
    show.add_argument("key", metavar="KEY", nargs="?")
    show.add_argument("--all", action="store_true", help="every output, with its value")

    listing = groups.command("event", "list", list_events, help="list a stack's events, oldest first")
    listing.add_argument("stack", metavar="STACK")
    listing.add_argument(
        "--follow", action="store_true", help="keep printing new events until the stack settles"
    )
    listing.add_argument("--limit", type=_positive, metavar="N", help="list at most N events")
    listing.add_argument("--marker", metavar="ID", help="list the events after the one with this id")


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


async def list_resources(args: argparse.Namespace, ctx: Context) -> int:
    path = stack_path(await find_stack(ctx, args.stack))
    ctx.print(ctx.output.rows((await ctx.api.get(f"{path}/resources"))["resources"], RESOURCE_COLUMNS))
    return 0


async def show_resource(args: argparse.Namespace, ctx: Context) -> int:
    path = stack_path(await find_stack(ctx, args.stack))
    resource = dict((await ctx.api.get(f"{path}/resources/{segment(args.resource)}"))["resource"])
    resource.pop("links", None)
    ctx.print(ctx.output.record(resource))
    return 0


async def list_outputs(args: argparse.Namespace, ctx: Context) -> int:
    path = stack_path(await find_stack(ctx, args.stack))
    ctx.print(ctx.output.rows((await ctx.api.get(f"{path}/outputs"))["outputs"], OUTPUT_COLUMNS))
    return 0


async def show_output(args: argparse.Namespace, ctx: Context) -> int:
    if args.all == (args.key is not None):
        raise CliError("output show takes an output KEY or --all")
    stack = await find_stack(ctx, args.stack)
    if args.all:  # as `openstack stack output show --all`: each output under its key
        outputs = {o["output_key"]: o for o in stack.get("outputs") or []}
        ctx.print(ctx.output.record(outputs))
        return 0
    output = (await ctx.api.get(f"{stack_path(stack)}/outputs/{segment(args.key)}"))["output"]
    ctx.print(ctx.output.record(output))
    return 0


async def list_events(args: argparse.Namespace, ctx: Context) -> int:
    path = stack_path(await find_stack(ctx, args.stack))
    if args.follow:
        await follow_events(ctx, path, lambda event: ctx.print(_streamed(event, ctx.output.fmt)))
        return 0
    events: list[dict[str, Any]] = []
    async for event in events_after(ctx, path, args.marker):
        events.append(event)
        if args.limit is not None and len(events) >= args.limit:
            break
    ctx.print(ctx.output.rows(events, EVENT_COLUMNS))
    return 0


def _streamed(event: dict[str, Any], fmt: Format) -> str:
    """One followed event: a log line, or a self-contained JSON line / YAML document."""
    event = {k: v for k, v in event.items() if k != "links"}
    if fmt is Format.JSON:
        return json.dumps(event)
    if fmt is Format.YAML:
        return "---\n" + yaml.safe_dump(event, sort_keys=False).rstrip("\n")
    return event_line(event)
