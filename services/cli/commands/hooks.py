"""`converge stack hook poll|clear`: the resources a stack's hooks hold, and letting them go.

A hook (`hooks:` in the environment's `resource_registry.resources`) pauses a
resource's action; the engine records it as an event ("CREATE paused until
Hook pre-create is cleared") and a signal with `unset_hook` lets it go on
("Hook pre-create is cleared"). `poll` reads the stack's events, with
`--nested-depth` those of its nested stacks too, and lists each hook reached
and not cleared since, as `openstack stack hook poll` does; `clear` sends the
signal for each hook type given to each resource named, where a resource of a
nested stack is named by its path (`outer/inner`).
"""

from __future__ import annotations

import argparse
import re
from typing import Any
from urllib.parse import unquote

from services.cli.client import CliError, segment
from services.cli.commands import Context, Groups, command, find_stack, stack_path
from services.cli.commands.waiting import events_after
from services.cli.output import Column

HOOK_TYPES = ("pre-create", "pre-update", "pre-delete")
_PAUSED = re.compile(r"paused until Hook (?P<hook>[\w-]+) is cleared")
_CLEARED = re.compile(r"^Hook (?P<hook>[\w-]+) is cleared")
POLL_COLUMNS = [
    Column("Resource Name", "resource_name"),
    Column("Type", "resource_type"),
    Column("Hook", "hook"),
    Column("Stack Name", "stack_name"),
]


def register(groups: Groups) -> None:
    hook = groups("stack").add_parser(
        "hook", help="the resources a hook holds, and letting them go", description="stack hooks"
    )
    hook.set_defaults(parser=hook)
    actions = hook.add_subparsers(dest="hook_action", required=True, metavar="ACTION")
    poll = command(
        actions, "poll", poll_hooks, help="list the hooks reached and not cleared", common=groups.common
    )
    poll.add_argument("stack", metavar="NAME_OR_ID")
    poll.add_argument(
        "--nested-depth", type=int, default=0, metavar="N", help="also N levels of nested stacks"
    )
    clear = command(
        actions, "clear", clear_hooks, help="let resources held by hooks go on", common=groups.common
    )
    clear.add_argument("stack", metavar="NAME_OR_ID")
    clear.add_argument(
        "resources", metavar="RESOURCE", nargs="+", help="a name, or a path into nested stacks"
    )
    for hook_type in HOOK_TYPES:
        clear.add_argument(f"--{hook_type}", action="append_const", const=hook_type, dest="hooks")


def pending_hooks(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The hooks reached and not cleared since, in the order they were reached. Pure."""
    held: dict[tuple[str, str, str], dict[str, Any]] = {}
    for event in events:
        reason = str(event.get("resource_status_reason") or "")
        where = (_stack_name(event), str(event.get("resource_name", "")))
        if (paused := _PAUSED.search(reason)) is not None:
            hook = paused["hook"]
            held[(*where, hook)] = {
                "resource_name": where[1],
                "resource_type": event.get("resource_type", ""),
                "hook": hook,
                "stack_name": where[0],
            }
        elif (cleared := _CLEARED.search(reason)) is not None:
            held.pop((*where, cleared["hook"]), None)
    return list(held.values())


def _stack_name(event: dict[str, Any]) -> str:
    """The name of the stack an event belongs to, from its `stack` link (`.../stacks/NAME/ID`)."""
    for link in event.get("links") or []:
        if isinstance(link, dict) and link.get("rel") == "stack":
            parts = str(link.get("href", "")).rstrip("/").split("/")
            return unquote(parts[-2]) if len(parts) >= 2 else ""
    return ""


async def poll_hooks(args: argparse.Namespace, ctx: Context) -> int:
    if args.nested_depth < 0:
        raise CliError("--nested-depth must be 0 or more")
    path = stack_path(await find_stack(ctx, args.stack))
    params = {"nested_depth": str(args.nested_depth)} if args.nested_depth else None
    events = [event async for event in events_after(ctx, path, None, params)]
    ctx.print(ctx.output.rows(pending_hooks(events), POLL_COLUMNS))
    return 0


async def clear_hooks(args: argparse.Namespace, ctx: Context) -> int:
    if not args.hooks:
        raise CliError(f"say which hook to clear: {', '.join('--' + h for h in HOOK_TYPES)}")
    top = stack_path(await find_stack(ctx, args.stack))
    for named in args.resources:
        *parents, resource = named.split("/")
        path = top
        for parent in parents:  # the nested stack a parent resource owns is its physical id
            shown = await ctx.api.get(f"{path}/resources/{segment(parent)}")
            child = shown["resource"].get("physical_resource_id")
            if not child:
                raise CliError(f"resource {parent} of {named} has no nested stack")
            path = stack_path(await find_stack(ctx, child))
        for hook in args.hooks:
            await ctx.api.post(f"{path}/resources/{segment(resource)}/signal", {"unset_hook": hook})
    return 0
