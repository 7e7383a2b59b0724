"""`converge template validate` and `converge observe start|stop|show`: calls that change no stack's goal.

Validation POSTs the template (with environments and parameters) to
`/validate` and prints what the API makes of it. Observing is a stack
action (`{"observe_start": {...}}`, `{"observe_stop": null}`); `show` prints
the stack's observation (settings, last round, and the drift that exists now).
"""

from __future__ import annotations

import argparse

from services.cli.commands import Context, Subparsers, client_options, command, find_stack, stack_path
from services.cli.inputs import load_document, merged_environment, parse_parameters


def register(subparsers: Subparsers) -> None:
    common = client_options()

    template = subparsers.add_parser("template", help="check templates")
    templates = template.add_subparsers(dest="action", required=True, metavar="ACTION")
    validate = command(templates, "validate", validate_template, help="validate a template", common=common)
    validate.add_argument("-t", "--template", required=True, help="template file (YAML or JSON)")
    validate.add_argument("-e", "--environment", action="append", default=[], help="environment file")
    validate.add_argument("--parameter", action="append", default=[], metavar="KEY=VALUE")

    observe = subparsers.add_parser("observe", help="watch a stack's real resources for drift")
    observing = observe.add_subparsers(dest="action", required=True, metavar="ACTION")
    start = command(observing, "start", observe_start, help="start observing a stack", common=common)
    start.add_argument("stack", metavar="STACK")
    start.add_argument("--interval", type=_positive, required=True, metavar="SECONDS")
    start.add_argument("--heal", action="store_true", help="converge drifted resources back to the goal")
    stop = command(observing, "stop", observe_stop, help="stop observing a stack", common=common)
    stop.add_argument("stack", metavar="STACK")
    show = command(
        observing, "show", observe_show, help="show a stack's observation and drift", common=common
    )
    show.add_argument("stack", metavar="STACK")


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


async def validate_template(args: argparse.Namespace, ctx: Context) -> int:
    body = {
        "template": load_document(args.template, what="template"),
        "environment": merged_environment(args.environment),
        "parameters": parse_parameters(args.parameter),
    }
    ctx.print(ctx.output.record(await ctx.api.post("validate", body)))
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
