"""`converge template validate` and `converge observe start|stop|show`: calls that change no stack's goal.

Validation POSTs the template (with environments and parameters) to
`/validate` and prints what the API makes of it. Observing is a stack
action (`{"observe_start": {...}}`, `{"observe_stop": null}`); `show` prints
the stack's observation (settings, last round, and the drift that exists now).
"""

from __future__ import annotations

import argparse

from services.cli.commands import Context, Groups, find_stack, stack_path
from services.cli.commands.stacks import goal_body, goal_options


def register(groups: Groups) -> None:
    validate = groups.command("template", "validate", validate_template, help="validate a template")
    goal_options(validate, template_required=True, wait=False)

    start = groups.command("observe", "start", observe_start, help="start observing a stack")
    start.add_argument("stack", metavar="STACK")
    start.add_argument("--interval", type=_positive, required=True, metavar="SECONDS")
    start.add_argument("--heal", action="store_true", help="converge drifted resources back to the goal")
    stop = groups.command("observe", "stop", observe_stop, help="stop observing a stack")
    stop.add_argument("stack", metavar="STACK")
    show = groups.command("observe", "show", observe_show, help="show a stack's observation and drift")
    show.add_argument("stack", metavar="STACK")


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


async def validate_template(args: argparse.Namespace, ctx: Context) -> int:
    ctx.print(ctx.output.record(await ctx.api.post("validate", goal_body(args))))
    return 0


async def observe_start(args: argparse.Namespace, ctx: Context) -> int:
    path = stack_path(await find_stack(ctx, args.stack))
    await ctx.api.post(f"{path}/actions", {"observe_start": {"interval": args.interval, "heal": args.heal}})
    print(f"Observing stack {args.stack} every {args.interval} s.", file=ctx.console.err)
    return 0


async def observe_stop(args: argparse.Namespace, ctx: Context) -> int:
    path = stack_path(await find_stack(ctx, args.stack))
    await ctx.api.post(f"{path}/actions", {"observe_stop": None})
    print(f"Stopped observing stack {args.stack}.", file=ctx.console.err)
    return 0


async def observe_show(args: argparse.Namespace, ctx: Context) -> int:
    path = stack_path(await find_stack(ctx, args.stack))
    ctx.print(ctx.output.record((await ctx.api.get(f"{path}/observation"))["observation"]))
    return 0
