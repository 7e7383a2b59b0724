"""Watching a stack operation: the `--wait` progress display and `event list --follow`.

Both poll the API every `ctx.poll_seconds` until the stack is no longer
IN_PROGRESS. `--wait` reads the stack and its resources and shows one line
(done / in progress / failed, elapsed time): rewritten in place on a
terminal, printed again only when it changes otherwise. It goes to stderr,
so stdout keeps only the result. `--follow` pages new events with
`?marker=<last id>`. An operation that failed, or was rolled back, ends
`--wait` with exit 1 and the reason.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from services.cli.client import CliError, NotFoundError
from services.cli.commands import Context

EVENT_PAGE = 200
CLEAR_LINE = "\r\x1b[K"


def in_progress(stack: dict[str, Any]) -> bool:
    return str(stack.get("stack_status", "")).endswith("_IN_PROGRESS")


@dataclass(frozen=True)
class Tally:
    total: int
    done: int
    in_progress: int
    failed: int

    @classmethod
    def of(cls, resources: list[dict[str, Any]]) -> Tally:
        states = Counter(_state(str(r.get("resource_status", ""))) for r in resources)
        return cls(len(resources), states["done"], states["in_progress"], states["failed"])

    def text(self) -> str:
        return f"{self.done}/{self.total} done, {self.in_progress} in progress, {self.failed} failed"


def _state(status: str) -> str:
    if status.endswith("_IN_PROGRESS"):
        return "in_progress"
    if status.endswith("_FAILED"):
        return "failed"
    if status.endswith("_COMPLETE") and not status.startswith("INIT_"):
        return "done"
    return "waiting"


async def wait_for_stack(ctx: Context, path: str, *, gone_is_done: bool = False) -> dict[str, Any] | None:
    """Poll until the stack at `path` settles; its final detail (None: deleted)."""
    started = ctx.clock()
    shown = ""
    console = ctx.console
    try:
        while True:
            try:
                stack = dict((await ctx.api.get(path))["stack"])
                resources = list((await ctx.api.get(f"{path}/resources"))["resources"])
            except NotFoundError:
                if gone_is_done:
                    return None
                raise
            summary = f"{stack['stack_name']} {stack['stack_status']}  {Tally.of(resources).text()}"
            elapsed = f"{ctx.clock() - started:.0f}s"
            if console.live:
                console.err.write(f"{CLEAR_LINE}{summary}  {elapsed}")
                console.err.flush()
            elif summary != shown:
                print(f"{summary}  {elapsed}", file=console.err, flush=True)
            shown = summary
            if not in_progress(stack):
                return stack
            await ctx.pause()
    finally:
        if console.live:
            console.err.write("\n")
            console.err.flush()


async def check_outcome(ctx: Context, path: str, stack: dict[str, Any]) -> None:
    """Raise a CliError naming the reason (and failed resources) if the operation failed,
    or was rolled back (the goal was not reached either way)."""
    status = str(stack.get("stack_status", ""))
    if status.startswith("ROLLBACK_"):
        raise CliError(f"stack {stack['stack_name']} {status}: {await _why_rolled_back(ctx, path, stack)}")
    if not status.endswith("_FAILED"):
        return
    lines = [f"stack {stack['stack_name']} {status}: {stack.get('stack_status_reason') or 'no reason given'}"]
    try:
        resources = (await ctx.api.get(f"{path}/resources"))["resources"]
    except NotFoundError:
        resources = []
    lines += [
        f"  {r['resource_name']} {r['resource_status']}: {r.get('resource_status_reason') or ''}"
        for r in resources
        if str(r.get("resource_status", "")).endswith("_FAILED")
    ]
    raise CliError("\n".join(lines))


async def _why_rolled_back(ctx: Context, path: str, stack: dict[str, Any]) -> str:
    """The reason the operation that was rolled back failed: its stack's latest *_FAILED event."""
    params = {"limit": str(EVENT_PAGE), "sort_dir": "desc"}
    events = (await ctx.api.get(f"{path}/events", params))["events"]
    for event in events:
        if event.get("resource_name") == stack["stack_name"] and str(event.get("resource_status")).endswith(
            "_FAILED"
        ):
            return f"rolled back after {event['resource_status']}: {event.get('resource_status_reason')}"
    return str(stack.get("stack_status_reason") or "rolled back")


async def events_after(
    ctx: Context, path: str, marker: str | None, more: dict[str, str] | None = None
) -> AsyncIterator[dict[str, Any]]:
    """Every event of the stack after `marker`, oldest first, page by page (`more`: further
    query parameters, e.g. nested_depth)."""
    while True:
        params = {"limit": str(EVENT_PAGE), "sort_dir": "asc", **(more or {})}
        if marker is not None:
            params["marker"] = marker
        page = list((await ctx.api.get(f"{path}/events", params))["events"])
        for event in page:
            yield event
        if len(page) < EVENT_PAGE:
            return
        marker = str(page[-1]["id"])


async def follow_events(ctx: Context, path: str, emit: Callable[[dict[str, Any]], None]) -> None:
    """Emit events as they happen until the stack is no longer IN_PROGRESS (or is deleted)."""
    marker: str | None = None
    while True:
        try:
            # read the status first: events up to a terminal status are then all in the page below
            settled = not in_progress(dict((await ctx.api.get(path))["stack"]))
            async for event in events_after(ctx, path, marker):
                emit(event)
                marker = str(event["id"])
        except NotFoundError:
            return  # deleted: its events went with it
        if settled:
            return
        await ctx.pause()


def event_line(event: dict[str, Any]) -> str:
    """One event the way `openstack stack event list` logs it."""
    where = f"{event.get('event_time')} [{event.get('resource_name')}]"
    return f"{where}: {event.get('resource_status')}  {event.get('resource_status_reason') or ''}"
