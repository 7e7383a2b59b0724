"""What is inside a stack: `converge resource ...`, `converge output ...`, `converge event list`.

All read-only. A stack is named by name or id; the API's redirect to the
canonical URL is followed by the client. `event list --follow` keeps
printing new events (see `waiting.follow_events`) as log lines, or one JSON
object / YAML document per event with `-f json|yaml`.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import yaml

from services.cli.client import segment
from services.cli.commands import Context, Subparsers, client_options, command, find_stack, stack_path
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


def register(subparsers: Subparsers) -> None:
    common = client_options()

    resource = subparsers.add_parser("resource", help="inspect a stack's resources")
    resources = resource.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = command(resources, "list", list_resources, help="list a stack's resources", common=common)
    listing.add_argument("stack", metavar="STACK")
    show = command(resources, "show", show_resource, help="show one resource", common=common)
    show.add_argument("stack", metavar="STACK")
    show.add_argument("resource", metavar="RESOURCE")

    output = subparsers.add_parser("output", help="read a stack's outputs")
    outputs = output.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = command(outputs, "list", list_outputs, help="list a stack's outputs", common=common)
    listing.add_argument("stack", metavar="STACK")
    show = command(outputs, "show", show_output, help="show one output and its value", common=common)
    show.add_argument("stack", metavar="STACK")
    show.add_argument("key", metavar="KEY")

    event = subparsers.add_parser("event", help="read a stack's events")
    events = event.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = command(events, "list", list_events, help="list a stack's events, oldest first", common=common)
    listing.add_argument("stack", metavar="STACK")
    listing.add_argument(
        "--follow", action="store_true", help="keep printing new events until the stack settles"
    )


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
    path = stack_path(await find_stack(ctx, args.stack))
    ctx.print(ctx.output.record((await ctx.api.get(f"{path}/outputs/{segment(args.key)}"))["output"]))
    return 0


async def list_events(args: argparse.Namespace, ctx: Context) -> int:
    path = stack_path(await find_stack(ctx, args.stack))
    if args.follow:
        await follow_events(ctx, path, lambda event: ctx.print(_streamed(event, ctx.output.fmt)))
        return 0
    events = [event async for event in events_after(ctx, path, None)]
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
