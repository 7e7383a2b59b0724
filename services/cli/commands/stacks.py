"""`converge stack ...`: create, update, delete, list, show, check and cancel stacks.

Create and update send the template and environments as parsed objects
(see `inputs`); with `--wait` they watch the operation (see `waiting`) and
fail with the reason on a *_FAILED status. Output follows `openstack stack`.
`stack check` asks whether every resource still exists and is healthy; the
resources it finds gone are recorded missing, so `stack update --existing`
creates them again.
"""

from __future__ import annotations

import argparse
from typing import Any

from services.cli.client import CliError, segment
from services.cli.commands import Context, Subparsers, client_options, command, find_stack, stack_path
from services.cli.commands.waiting import check_outcome, wait_for_stack
from services.cli.inputs import load_document, merged_environment, parse_parameters
from services.cli.output import Column

LIST_COLUMNS = [
    Column("ID", "id"),
    Column("Stack Name", "stack_name"),
    Column("Stack Status", "stack_status"),
    Column("Creation Time", "creation_time"),
    Column("Updated Time", "updated_time"),
]
SUMMARY_KEYS = ["id", "stack_name", "description", "creation_time", "updated_time"]
SUMMARY_KEYS += ["stack_status", "stack_status_reason"]


def register(subparsers: Subparsers) -> None:
    group = subparsers.add_parser("stack", help="create, update, delete and inspect stacks")
    stack = group.add_subparsers(dest="action", required=True, metavar="ACTION")
    common = client_options()

    create = command(stack, "create", create_stack, help="create a stack", common=common)
    create.add_argument("name", help="name of the new stack")
    _goal_options(create, template_required=True)
    create.add_argument("--timeout", type=int, metavar="MINUTES", help="stack timeout in minutes")
    rollback = create.add_mutually_exclusive_group()
    rollback.add_argument("--disable-rollback", dest="rollback", action="store_false", default=None)
    rollback.add_argument("--enable-rollback", dest="rollback", action="store_true")
    create.add_argument("--tags", help="comma-separated tags")

    update = command(stack, "update", update_stack, help="update a stack to a new goal", common=common)
    update.add_argument("stack", metavar="NAME_OR_ID")
    _goal_options(update, template_required=False)
    update.add_argument(
        "--existing",
        action="store_true",
        help="keep the current template, parameters and environment where not given (PATCH)",
    )

    delete = command(stack, "delete", delete_stack, help="delete stacks", common=common)
    delete.add_argument("stacks", metavar="NAME_OR_ID", nargs="+")
    delete.add_argument("--wait", action="store_true", help="wait until the stacks are gone")
    delete.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")

    command(stack, "list", list_stacks, help="list stacks", common=common)
    show = command(stack, "show", show_stack, help="show a stack", common=common)
    show.add_argument("stack", metavar="NAME_OR_ID")
    check = command(
        stack, "check", check_stack, help="check that every resource exists and is healthy", common=common
    )
    check.add_argument("stack", metavar="NAME_OR_ID")
    check.add_argument("--wait", action="store_true", help="show progress until the check ends")
    cancel = command(stack, "cancel", cancel_stack, help="cancel the stack's running update", common=common)
    cancel.add_argument("stack", metavar="NAME_OR_ID")
    cancel.add_argument(
        "--no-rollback", action="store_true", help="stop where it is (FAILED) instead of rolling back"
    )


def _goal_options(parser: argparse.ArgumentParser, *, template_required: bool) -> None:
    parser.add_argument("-t", "--template", required=template_required, help="template file (YAML or JSON)")
    parser.add_argument(
        "-e", "--environment", action="append", default=[], help="environment file (repeat; later wins)"
    )
    parser.add_argument(
        "--parameter", action="append", default=[], metavar="KEY=VALUE", help="a parameter (repeat)"
    )
    parser.add_argument("--wait", action="store_true", help="show progress until the operation ends")


def goal_body(args: argparse.Namespace) -> dict[str, Any]:
    """Template, environment and parameters as the API takes them (only those given)."""
    body: dict[str, Any] = {}
    if args.template is not None:
        body["template"] = load_document(args.template, what="template")
    if args.environment:
        body["environment"] = merged_environment(args.environment)
    if args.parameter:
        body["parameters"] = parse_parameters(args.parameter)
    return body


async def create_stack(args: argparse.Namespace, ctx: Context) -> int:
    body: dict[str, Any] = {"stack_name": args.name, **goal_body(args)}
    if args.timeout is not None:
        body["timeout_mins"] = args.timeout
    if args.rollback is not None:
        body["disable_rollback"] = not args.rollback
    if args.tags:
        body["tags"] = args.tags
    created = await ctx.api.post("stacks", body)
    return await _settle(args, ctx, f"stacks/{segment(args.name)}/{segment(created['stack']['id'])}")


async def update_stack(args: argparse.Namespace, ctx: Context) -> int:
    path = stack_path(await find_stack(ctx, args.stack))
    body = goal_body(args)
    if args.existing:
        await ctx.api.request("PATCH", path, body=body)
    else:
        if "template" not in body:
            raise CliError("stack update needs -t/--template (or --existing to keep the current one)")
        await ctx.api.request("PUT", path, body=body)
    return await _settle(args, ctx, path)


async def _settle(args: argparse.Namespace, ctx: Context, path: str) -> int:
    """Print the stack (after waiting, with --wait); fail on a *_FAILED status."""
    if args.wait:
        stack = await wait_for_stack(ctx, path)
        assert stack is not None
        ctx.print(ctx.output.record(stack, keys=SUMMARY_KEYS))
        await check_outcome(ctx, path, stack)
        return 0
    stack = dict((await ctx.api.get(path))["stack"])
    ctx.print(ctx.output.record(stack, keys=SUMMARY_KEYS))
    return 0


async def delete_stack(args: argparse.Namespace, ctx: Context) -> int:
    if not args.yes and not ctx.console.confirm("Are you sure you want to delete this stack(s) [y/N]? "):
        print("Deletion cancelled.", file=ctx.console.err)
        return 1
    paths = [stack_path(await find_stack(ctx, name)) for name in args.stacks]
    for path in paths:
        await ctx.api.request("DELETE", path)
    if args.wait:
        for name, path in zip(args.stacks, paths, strict=True):
            stack = await wait_for_stack(ctx, path, gone_is_done=True)
            if stack is not None:
                await check_outcome(ctx, path, stack)
            print(f"Stack {name} deleted.", file=ctx.console.err, flush=True)
    return 0


async def list_stacks(args: argparse.Namespace, ctx: Context) -> int:
    stacks = (await ctx.api.get("stacks"))["stacks"]
    ctx.print(ctx.output.rows(stacks, LIST_COLUMNS))
    return 0


async def show_stack(args: argparse.Namespace, ctx: Context) -> int:
    stack = await find_stack(ctx, args.stack)
    stack.pop("links", None)
    ctx.print(ctx.output.record(stack))
    return 0


async def check_stack(args: argparse.Namespace, ctx: Context) -> int:
    path = stack_path(await find_stack(ctx, args.stack))
    await ctx.api.post(f"{path}/actions", {"check": None})
    return await _settle(args, ctx, path)


async def cancel_stack(args: argparse.Namespace, ctx: Context) -> int:
    action = "cancel_without_rollback" if args.no_rollback else "cancel_update"
    await ctx.api.post(f"{stack_path(await find_stack(ctx, args.stack))}/actions", {action: None})
    print(f"Cancel requested for stack {args.stack}.", file=ctx.console.err)
    return 0
