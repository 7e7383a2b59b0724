"""What is done to a stack or a resource besides changing its goal: `stack check|suspend|
resume|cancel|abandon|adopt`, `resource signal|mark-unhealthy`.

check, suspend and resume are stack actions (`{"check": null}`), shown like
an update (`--wait` watches them). `stack check` asks whether every resource
still exists and is healthy; those it finds gone are recorded missing, so
`stack update --existing` creates them again. `abandon` forgets a stack and
leaves its resources, printing (or writing, with `--output-file`, which is
opened before anything is abandoned) the data `adopt --adopt-file` takes to
manage them again. As with `openstack stack`, signal and mark-unhealthy print
nothing when they succeed.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, TextIO

from services.cli.client import CliError, segment
from services.cli.commands import Context, Groups, find_stack, stack_path
from services.cli.commands.stacks import goal_body, goal_options, rollback_options, settle

STACK_ACTIONS = {
    "check": "check that every resource exists and is healthy",
    "suspend": "suspend a stack's resources (dependents first)",
    "resume": "resume a suspended stack",
}
MAX_SIGNAL_BYTES = 1024 * 1024


def register(groups: Groups) -> None:
    for name, text in STACK_ACTIONS.items():
        action = groups.command("stack", name, stack_action, help=text)
        action.add_argument("stack", metavar="NAME_OR_ID")
        action.add_argument("--wait", action="store_true", help="show progress until it ends")

    cancel = groups.command("stack", "cancel", cancel_stack, help="cancel the stack's running update")
    cancel.add_argument("stack", metavar="NAME_OR_ID")
    cancel.add_argument(
        "--no-rollback", action="store_true", help="stop where it is (FAILED) instead of rolling back"
    )

    abandon = groups.command(
        "stack", "abandon", abandon_stack, help="forget a stack, leaving its resources; print its data"
    )
    abandon.add_argument("stack", metavar="NAME_OR_ID")
    abandon.add_argument("--output-file", metavar="FILE", help="write the data (JSON) to FILE instead")

    adopt = groups.command("stack", "adopt", adopt_stack, help="make a stack of resources an abandon left")
    adopt.add_argument("name", help="name of the new stack")
    adopt.add_argument("--adopt-file", required=True, metavar="FILE", help="what `stack abandon` printed")
    goal_options(adopt, template_required=False)
    adopt.add_argument("--timeout", type=int, metavar="MINUTES", help="stack timeout in minutes")
    rollback_options(adopt)

    signal = groups.command("resource", "signal", signal_resource, help="send a signal to a resource")
    signal.add_argument("stack", metavar="STACK")
    signal.add_argument("resource", metavar="RESOURCE")
    data = signal.add_mutually_exclusive_group()
    data.add_argument("--data", metavar="JSON", help='the signal\'s JSON body, e.g. {"status": "SUCCESS"}')
    data.add_argument("--data-file", metavar="FILE", help="a file holding the JSON body")

    unhealthy = groups.command(
        "resource",
        "mark-unhealthy",
        mark_unhealthy,
        help="mark a resource unhealthy, so the next update replaces it",
    )
    unhealthy.add_argument("stack", metavar="STACK")
    unhealthy.add_argument("resource", metavar="RESOURCE")
    unhealthy.add_argument("reason", nargs="?", default="", help="why (shown as its status reason)")
    unhealthy.add_argument("--reset", action="store_true", help="mark it healthy again")


async def stack_action(args: argparse.Namespace, ctx: Context) -> int:
    path = stack_path(await find_stack(ctx, args.stack))
    await ctx.api.post(f"{path}/actions", {args.action: None})  # `action`: the command's name
    return await settle(args, ctx, path)


async def cancel_stack(args: argparse.Namespace, ctx: Context) -> int:
    action = "cancel_without_rollback" if args.no_rollback else "cancel_update"
    await ctx.api.post(f"{stack_path(await find_stack(ctx, args.stack))}/actions", {action: None})
    print(f"Cancel requested for stack {args.stack}.", file=ctx.console.err)
    return 0


async def abandon_stack(args: argparse.Namespace, ctx: Context) -> int:
    path = stack_path(await find_stack(ctx, args.stack))
    if args.output_file is None:
        ctx.print(ctx.output.record(await ctx.api.request("DELETE", f"{path}/abandon")))
        return 0
    with _output_file(args.output_file) as handle:  # before the stack is forgotten, not after
        data = await ctx.api.request("DELETE", f"{path}/abandon")
        json.dump(data, handle, indent=2)
    print(
        f"Stack {args.stack} abandoned; adopt it with: converge stack adopt NAME --adopt-file "
        f"{args.output_file}",
        file=ctx.console.err,
    )
    return 0


def _output_file(path: str) -> TextIO:
    try:
        return Path(path).open("w", encoding="utf-8")
    except OSError as exc:
        raise CliError(f"cannot write {path}: {exc.strerror or exc}") from exc


def _adopt_data(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise CliError(f"cannot read adopt file {path}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise CliError(f"cannot read adopt file {path}: not UTF-8 text") from exc


async def adopt_stack(args: argparse.Namespace, ctx: Context) -> int:
    data = _adopt_data(args.adopt_file)
    body: dict[str, Any] = {"stack_name": args.name, "adopt_stack_data": data, **goal_body(args)}
    if args.timeout is not None:
        body["timeout_mins"] = args.timeout
    if args.rollback is not None:
        body["disable_rollback"] = not args.rollback
    created = await ctx.api.post("stacks", body)
    return await settle(args, ctx, f"stacks/{segment(args.name)}/{segment(created['stack']['id'])}")


async def signal_resource(args: argparse.Namespace, ctx: Context) -> int:
    body = _signal_body(args)
    path = stack_path(await find_stack(ctx, args.stack))
    await ctx.api.post(f"{path}/resources/{segment(args.resource)}/signal", body)
    return 0


def _signal_body(args: argparse.Namespace) -> Any:
    if args.data_file is not None:
        try:
            with Path(args.data_file).open("rb") as handle:
                raw = handle.read(MAX_SIGNAL_BYTES + 1)
        except OSError as exc:
            raise CliError(f"cannot read {args.data_file}: {exc.strerror or exc}") from exc
        if len(raw) > MAX_SIGNAL_BYTES:
            raise CliError(f"{args.data_file} is larger than {MAX_SIGNAL_BYTES // 1024} KiB")
        text, source = raw.decode("utf-8", errors="replace"), args.data_file
    elif args.data is not None:
        text, source = args.data, "--data"
    else:
        return {}
    try:
        return json.loads(text)
    except ValueError as exc:
        raise CliError(f"{source} is not valid JSON: {exc}") from exc


async def mark_unhealthy(args: argparse.Namespace, ctx: Context) -> int:
    path = stack_path(await find_stack(ctx, args.stack))
    body = {"mark_unhealthy": not args.reset, "resource_status_reason": args.reason}
    await ctx.api.request("PATCH", f"{path}/resources/{segment(args.resource)}", body=body)
    return 0
