"""The dashboard's data routes under one stack (Converge extensions to the Heat API).

`GET .../graph` is a snapshot: a node per current resource (name, type,
status, physical id, whether it was replaced by the current operation or has
drifted) and an edge per dependency, their drawing (`layout`: each box's
position and each edge's path around the boxes, `services.engine.graph_layout`,
computed in the template pool), plus the event cursor the snapshot is good to.
`GET .../stream?after=<cursor>` then pushes what changes as server-sent events:
the engine tails the stack's events with one query per poll interval and
sends each batch, with the stack's status, as one SSE message; a
`Last-Event-ID` header resumes where a dropped stream stopped.
Both sit behind the auth middleware like every `/v1` route (the browser reads
the stream with `fetch`, which can send `X-Auth-Token`).

Limits: a token holds at most `ApiLimits.streams_per_token` streams open at
once on one engine (429 beyond, counted in `StreamSlots`), and every poll
reads at most `STREAM_BATCH` events, so replaying a long history from
cursor 0 costs the database one events page per poll interval, never more.
Reasons are masked with the stack's `Secrets` as everywhere else.

`stack_graph` is pure: it turns the rows and the template's dependencies into
the JSON the dashboard draws, and is unit-tested without a database.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from services.engine.api.deps import ApiDeps
from services.engine.api.errors import bad_request, too_many
from services.engine.api.masking import NO_SECRETS, Secrets
from services.engine.api.views import json_response, timestamp
from services.engine.graph_layout import layout
from services.engine.store.queries import StackView

#: Events sent per poll at most (half a normal events page); a backlog drains over the
#: following polls, one batch per poll interval.
STREAM_BATCH = 500
#: Seconds between two polls of one stream: one cheap query each.
POLL_SECONDS = 0.3
#: Seconds of silence after which a comment keeps proxies from closing the stream.
KEEPALIVE_SECONDS = 15.0
#: Set when the server shuts down, so open streams end at once instead of holding it up.
CLOSING = web.AppKey("streams_closing", asyncio.Event)


class StreamSlots:
    """Streams open per token on this engine (only counts: the tokens are the keys)."""

    def __init__(self) -> None:
        self._open: dict[str, int] = {}

    def take(self, token: str, limit: int) -> bool:
        if self._open.get(token, 0) >= limit:
            return False
        self._open[token] = self._open.get(token, 0) + 1
        return True

    def give_back(self, token: str) -> None:
        self._open[token] -= 1
        if not self._open[token]:
            del self._open[token]


SLOTS = web.AppKey("stream_slots", StreamSlots)


def on_shutdown_close_streams(app: web.Application) -> None:
    """Give the app its stream slots, and end open streams at once on shutdown."""
    closing = asyncio.Event()
    app[CLOSING] = closing
    app[SLOTS] = StreamSlots()

    async def close(_: web.Application) -> None:
        closing.set()

    app.on_shutdown.append(close)


@dataclass(frozen=True)
class GraphRow:
    """What the graph needs of one current resource row."""

    resource_id: int
    name: str
    type: str
    physical_id: str | None
    action: str
    status: str
    status_reason: str
    requires: tuple[int, ...]
    replaces: int | None
    template_id: str | None
    drifted: bool


def stack_graph(
    rows: Sequence[GraphRow],
    *,
    template_requires: Mapping[str, frozenset[str]] | None,
    current_template_id: str | None,
) -> dict[str, Any]:
    """Nodes, and an edge {"from": required, "to": dependent} per dependency.

    Resources in the current template take their edges from it (a row not yet
    converged has stored none); rows the template no longer has (being deleted)
    keep the dependencies stored on them."""
    by_id = {r.resource_id: r.name for r in rows}
    names = {r.name for r in rows}
    nodes = []
    edges: set[tuple[str, str]] = set()
    for r in rows:
        nodes.append(
            {
                "name": r.name,
                "type": r.type,
                "action": r.action,
                "status": r.status,
                "status_reason": r.status_reason,
                "physical_resource_id": r.physical_id or "",
                "replaced": r.replaces is not None and r.template_id == current_template_id,
                "drifted": r.drifted,
            }
        )
        if template_requires is not None and r.name in template_requires:
            required = set(template_requires[r.name])
        else:
            required = {by_id[i] for i in r.requires if i in by_id}
        edges |= {(dep, r.name) for dep in required if dep in names and dep != r.name}
    return {
        "nodes": nodes,
        "edges": [{"from": a, "to": b} for a, b in sorted(edges)],
    }


def event_item(row: Mapping[str, Any], secrets: Secrets = NO_SECRETS) -> dict[str, Any]:
    return {
        "seq": row["event_seq"],
        "id": str(row["event_id"]),
        "event_time": timestamp(row["created_at"]),
        "resource_name": row["resource_name"],
        "resource_type": row["resource_type"],
        "physical_resource_id": row["physical_resource_id"] or "",
        "resource_action": row["action"],
        "resource_status": row["status"],
        "resource_status_reason": secrets.mask(row["reason"]),
    }


async def graph(deps: ApiDeps, request: web.Request, stack: StackView) -> web.Response:
    cursor, records = await deps.queries.graph_rows(stack.stack_id)
    definition = await deps.current_definition(stack)
    secrets = await deps.secrets.for_stack(stack.stack_id)
    rows = [
        GraphRow(
            resource_id=r["resource_id"],
            name=r["name"],
            type=r["type"],
            physical_id=r["physical_id"],
            action=r["action"],
            status=r["status"],
            status_reason=secrets.mask(r["status_reason"]),
            requires=tuple(r["requires"] or ()),
            replaces=r["replaces"],
            template_id=str(r["template_id"]) if r["template_id"] else None,
            drifted=r["drifted"],
        )
        for r in records
    ]
    requires = {n: d.requires for n, d in definition.resources.items()} if definition else None
    body = stack_graph(
        rows,
        template_requires=requires,
        current_template_id=str(stack.current_template_id) if stack.current_template_id else None,
    )
    # Laid out in the template pool: igraph's work grows with what the template makes.
    body["layout"] = await deps.templates.run(
        layout, [n["name"] for n in body["nodes"]], [(e["from"], e["to"]) for e in body["edges"]]
    )
    body["stack"] = {
        "id": str(stack.stack_id),
        "stack_name": stack.name,
        "stack_status": f"{stack.action}_{stack.status}",
        "stack_status_reason": secrets.mask(stack.status_reason),
    }
    body["cursor"] = cursor
    return json_response({"graph": body})


def _start_cursor(request: web.Request) -> int:
    raw = request.headers.get("Last-Event-ID") or request.query.get("after", "0")
    try:
        cursor = int(raw)
    except ValueError:
        cursor = -1
    if cursor < 0:
        raise bad_request(f"after (or Last-Event-ID) must be a non-negative integer, not {raw!r}")
    return cursor


async def stream(deps: ApiDeps, request: web.Request, stack: StackView) -> web.StreamResponse:
    """Server-sent events until the client goes or the stack is deleted: each message is
    `event: events`, `id: <last seq>`, data {"stack": {...}, "events": [...]}."""
    cursor = _start_cursor(request)
    token = request.headers.get("X-Auth-Token", "")
    slots, limit = request.app[SLOTS], deps.api_limits.streams_per_token
    if not slots.take(token, limit):
        raise too_many(
            f"this token already has {limit} live streams open (CONVERGE_MAX_STREAMS_PER_TOKEN); "
            "close one first"
        )
    try:
        response = web.StreamResponse(
            headers={
                "Content-Type": "text/event-stream",
                "Cache-Control": "no-store",
                "X-Accel-Buffering": "no",
            }
        )
        await response.prepare(request)
        with contextlib.suppress(ConnectionResetError):  # the client went away: nothing more to send
            await _pump(deps, stack, request, response, cursor, request.app[CLOSING])
        return response
    finally:
        slots.give_back(token)


async def _pump(
    deps: ApiDeps,
    stack: StackView,
    request: web.Request,
    response: web.StreamResponse,
    cursor: int,
    closing: asyncio.Event,
) -> None:
    await response.write(b"retry: 2000\n\n")
    last_state: tuple[str, str, str] | None = None
    secrets = NO_SECRETS
    quiet = 0.0
    loop = asyncio.get_running_loop()
    while not closing.is_set():
        if request.transport is None or request.transport.is_closing():
            break  # the client hung up: stop polling for it
        started = loop.time()
        rows = await deps.queries.tail(stack.stack_id, cursor, STREAM_BATCH)
        if not rows:
            await response.write(b"event: gone\ndata: {}\n\n")
            break
        head = rows[0]
        state = (head["stack_action"], head["stack_status"], head["stack_status_reason"])
        if state != last_state:  # an operation may bring a template with other hidden values
            secrets = await deps.secrets.for_stack(stack.stack_id)
        events = [event_item(dict(r), secrets) for r in rows if r["event_seq"] is not None]
        if events or state != last_state:
            if events:
                cursor = events[-1]["seq"]
            data = {
                "stack": {
                    "stack_status": f"{state[0]}_{state[1]}",
                    "stack_status_reason": secrets.mask(state[2]),
                },
                "events": events,
            }
            message = f"id: {cursor}\nevent: events\ndata: {json.dumps(data, separators=(',', ':'))}\n\n"
            await response.write(message.encode())
            last_state = state
            quiet = 0.0
        elif quiet >= KEEPALIVE_SECONDS:
            await response.write(b": keepalive\n\n")
            quiet = 0.0
        if head["deleted"]:
            await response.write(b"event: gone\ndata: {}\n\n")
            break
        with contextlib.suppress(TimeoutError):  # a backlog too: one batch per poll interval
            await asyncio.wait_for(closing.wait(), POLL_SECONDS)
        quiet += loop.time() - started
