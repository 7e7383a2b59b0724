"""`converge stack create|update|delete|list|show`: a stack's goal and what is there.

Create and update send the template, the merged environments and every file
they refer to (`get_file`, template resources, registry entries), gathered as
python-heatclient gathers them (see `uploads`); with `--wait` they watch the
operation (see `waiting`) and fail with the reason on a *_FAILED status.
`update --dry-run` shows what an update would add, replace, update and
delete, changing nothing. Deleting several stacks reports each, goes on past
one that fails, and exits 1 if any did. Output follows `openstack stack`.
"""

from __future__ import annotations

import argparse
from typing import Any

from services.cli.client import CliError, segment
from services.cli.commands import Context, Groups, find_stack, stack_path
from services.cli.commands.waiting import check_outcome, wait_for_stack
from services.cli.inputs import parse_parameters
from services.cli.output import Column
from services.cli.uploads import Uploads

LIST_COLUMNS = [
    Column("ID", "id"),
    Column("Stack Name", "stack_name"),
    Column("Stack Status", "stack_status"),
    Column("Creation Time", "creation_time"),
    Column("Updated Time", "updated_time"),
]
LONG_COLUMNS = [
    *LIST_COLUMNS[:2],
    Column("Project", "project"),
    *LIST_COLUMNS[2:],
    Column("Parent", "parent"),
    Column("Tags", "tags"),
]
SUMMARY_KEYS = ["id", "stack_name", "description", "creation_time", "updated_time"]
SUMMARY_KEYS += ["stack_status", "stack_status_reason"]
#: `--tag-mode` to the stack list's query parameter (`tags`: has them all).
TAG_MODES = {"all": "tags", "any": "tags_any", "not": "not_tags", "not-any": "not_tags_any"}
CHANGE_KINDS = ("added", "deleted", "replaced", "updated", "unchanged")


def register(groups: Groups) -> None:
    create = groups.command("stack", "create", create_stack, help="create a stack")
    create.add_argument("name", help="name of the new stack")
    goal_options(create, template_required=True)
    create.add_argument("--timeout", type=int, metavar="MINUTES", help="stack timeout in minutes")
    rollback_options(create)
    create.add_argument("--tags", help="comma-separated tags")

    update = groups.command("stack", "update", update_stack, help="update a stack to a new goal")
    update.add_argument("stack", metavar="NAME_OR_ID")
    goal_options(update, template_required=False)
    update.add_argument(
        "--existing",
        action="store_true",
        help="keep the current template, parameters and environment where not given (PATCH)",
    )
    update.add_argument(
        "--dry-run", action="store_true", help="show what the update would change, and change nothing"
    )

    delete = groups.command("stack", "delete", delete_stacks, help="delete stacks")
    delete.add_argument("stacks", metavar="NAME_OR_ID", nargs="+")
    delete.add_argument("--wait", action="store_true", help="wait until the stacks are gone")
    delete.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")

    listing = groups.command("stack", "list", list_stacks, help="list stacks")
    listing.add_argument("--long", action="store_true", help="also show the project, parent and tags")
    listing.add_argument("--limit", type=_count, metavar="N", help="list at most N stacks")
    listing.add_argument("--marker", metavar="ID", help="list the stacks after the one with this id")
    listing.add_argument("--tags", metavar="TAG1,TAG2", help="only stacks with these tags (see --tag-mode)")
    listing.add_argument(
        "--tag-mode",
        choices=["any", "not", "not-any"],
        help="any: with at least one of the tags; not: without at least one; not-any: with none "
        "(default: with every one)",
    )

    show = groups.command("stack", "show", show_stack, help="show a stack")
    show.add_argument("stack", metavar="NAME_OR_ID")


def goal_options(parser: argparse.ArgumentParser, *, template_required: bool, wait: bool = True) -> None:
    parser.add_argument("-t", "--template", required=template_required, help="template file (YAML or JSON)")
    parser.add_argument(
        "-e", "--environment", action="append", default=[], help="environment file (repeat; later wins)"
    )
    parser.add_argument(
        "--parameter", action="append", default=[], metavar="KEY=VALUE", help="a parameter (repeat)"
    )
    if wait:
        parser.add_argument("--wait", action="store_true", help="show progress until the operation ends")


def rollback_options(parser: argparse.ArgumentParser) -> None:
    rollback = parser.add_mutually_exclusive_group()
    rollback.add_argument("--disable-rollback", dest="rollback", action="store_false", default=None)
    rollback.add_argument("--enable-rollback", dest="rollback", action="store_true")


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError("must be 0 or more")
    return value


def goal_body(args: argparse.Namespace) -> dict[str, Any]:
    """Template, environment, parameters and the files they name, as the API takes them
    (only those given)."""
    uploads = Uploads()
    body: dict[str, Any] = {}
    if getattr(args, "template", None) is not None:
        body["template"] = uploads.template(args.template)
    if args.environment:
        body["environment"] = uploads.environments(args.environment)
    if args.parameter:
        body["parameters"] = parse_parameters(args.parameter)
    if uploads.files:
        body["files"] = uploads.files
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
    return await settle(args, ctx, f"stacks/{segment(args.name)}/{segment(created['stack']['id'])}")


async def update_stack(args: argparse.Namespace, ctx: Context) -> int:
    path = stack_path(await find_stack(ctx, args.stack))
    body = goal_body(args)
    if "template" not in body and not args.existing:
        raise CliError("stack update needs -t/--template (or --existing to keep the current one)")
    if args.dry_run:
        preview = await ctx.api.request("PUT", f"{path}/preview", body={**body, "existing": args.existing})
        changes = preview["resource_changes"]
        names = {kind: [r["resource_name"] for r in changes.get(kind, [])] for kind in CHANGE_KINDS}
        ctx.print(ctx.output.record(names))
        return 0
    await ctx.api.request("PATCH" if args.existing else "PUT", path, body=body)
    return await settle(args, ctx, path)


async def settle(args: argparse.Namespace, ctx: Context, path: str) -> int:
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


async def delete_stacks(args: argparse.Namespace, ctx: Context) -> int:
    """Delete each stack named; one that cannot be deleted is reported and the rest go on."""
    err = ctx.console.err
    if not args.yes and not ctx.console.confirm("Are you sure you want to delete this stack(s) [y/N]? "):
        print("Deletion cancelled.", file=err)
        return 1
    failed = False
    deleting: list[tuple[str, str]] = []
    for name in args.stacks:
        try:
            path = stack_path(await find_stack(ctx, name))
            await ctx.api.request("DELETE", path)
        except CliError as exc:
            failed = True
            print(f"error: cannot delete stack {name}: {exc}", file=err, flush=True)
            continue
        deleting.append((name, path))
        if not args.wait:
            print(f"Deleting stack {name}.", file=err, flush=True)
    for name, path in deleting if args.wait else ():
        try:
            stack = await wait_for_stack(ctx, path, gone_is_done=True)
            if stack is not None:
                await check_outcome(ctx, path, stack)
        except CliError as exc:
            failed = True
            print(f"error: {exc}", file=err, flush=True)
            continue
        print(f"Stack {name} deleted.", file=err, flush=True)
    return 1 if failed else 0


async def list_stacks(args: argparse.Namespace, ctx: Context) -> int:
    params: dict[str, str] = {}
    if args.limit is not None:
        params["limit"] = str(args.limit)
    if args.marker:
        params["marker"] = args.marker
    if args.tag_mode and not args.tags:
        raise CliError("--tag-mode needs --tags")
    if args.tags:
        params[TAG_MODES[args.tag_mode or "all"]] = args.tags
    stacks = (await ctx.api.get("stacks", params))["stacks"]
    ctx.print(ctx.output.rows(stacks, LONG_COLUMNS if args.long else LIST_COLUMNS))
    return 0


async def show_stack(args: argparse.Namespace, ctx: Context) -> int:
    stack = await find_stack(ctx, args.stack)
    stack.pop("links", None)
    ctx.print(ctx.output.record(stack))
    return 0
