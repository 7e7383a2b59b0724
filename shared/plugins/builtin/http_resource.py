"""Converge::HTTP::Resource: manage one item of any REST API.

Where it sits: run by the worker (create/update/delete) and the observer
(observe); all traffic goes through `ctx.http`, the allow-listed gateway of
`shared.http_client`. Mapping onto the API:

- create: POST `url` with `body` and an `Idempotency-Key` header (the
  action's key, so a redelivered create is recognisable server-side); the
  item's id is `id_field` of the response (dots reach into nested objects);
  `url` may carry a query string but no fragment or user information, and
  `{url}/{id}` below adds the id as a path segment (before any query);
- update: PUT `{url}/{id}` with the whole body, or PATCH with a JSON merge
  patch of what changed; a change to a `replace_on_change` body key, `url` or
  `id_field` means replacement instead; 404/410 mean the item is gone
  (`ResourceGone`: it is created anew);
- delete: DELETE `{url}/{id}`; 404/410 mean it is already gone;
- observe: GET `{url}/{id}`; 404/410 = GONE. With `status_field`, READY when
  that field shows one of `ready_values`, FAILED on `failed_values`, else
  IN_PROGRESS; create/update then return IN_PROGRESS, and so does delete
  (also on 202 Accepted) until GET answers 404.

Attributes: `id`, `status`, `body` (the last JSON seen for the item).
`observe` reports the actual values of the template's body keys as the
`body` property, for drift detection. Errors: 429/5xx and connection
failures are `TransientError` (with Retry-After), other 4xx `PermanentError`
carrying the server's message. `timeout` bounds each request, and the
action's deadline bounds it too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal
from urllib.parse import quote, urlsplit, urlunsplit

from pydantic import field_validator

from shared.errors import PermanentError, TransientError
from shared.http_client import HttpClient, HttpResponse, error_for
from shared.plugins.base import (
    ActionContext,
    ActionResult,
    Observation,
    ObservedState,
    Outcome,
    Properties,
    ReplacementNeeded,
    ResourceGone,
    ResourceType,
    UpdateRule,
    prop,
)
from shared.plugins.builtin.common import as_props

GONE_STATUSES = frozenset({404, 410})


class HttpResourceProperties(Properties):
    url: str = prop(
        description="Collection URL: POST here creates an item, which lives at {url}/{id}.",
        update=UpdateRule.REPLACE,
    )
    body: dict[str, Any] = prop({}, description="JSON object sent on create and update.")
    headers: dict[str, str] = prop({}, description="Extra request headers.")
    id_field: str = prop(
        "id",
        description="Field of the create response holding the item's id (a.b for nested).",
        update=UpdateRule.REPLACE,
    )
    update_method: Literal["PUT", "PATCH"] = prop(
        "PUT", description="PUT sends the whole body; PATCH sends a JSON merge patch."
    )
    replace_on_change: list[str] = prop(
        [], description="Body keys whose change replaces the item instead of updating it."
    )
    status_field: str | None = prop(
        None, description="Field of the item showing its state; unset = ready when created."
    )
    ready_values: list[str] = prop(
        ["ACTIVE", "READY", "AVAILABLE"], description="status_field values meaning ready."
    )
    failed_values: list[str] = prop(["ERROR", "FAILED"], description="status_field values meaning failed.")
    timeout: float = prop(30.0, description="Seconds each HTTP request may take.", gt=0, le=3600)

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        try:
            parts = urlsplit(value)
            _ = parts.port
        except ValueError as exc:
            raise ValueError(f"not a URL: {exc}") from exc
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("must be an http:// or https:// URL with a host")
        if "@" in parts.netloc:
            raise ValueError("must not contain user information (user:password@)")
        if "#" in value:
            raise ValueError("must not contain a fragment (#...)")
        return value


def dig(data: Any, path: str) -> Any:
    """`data["a"]["b"]` for path "a.b"; None when any step is missing."""
    for key in path.split("."):
        if not isinstance(data, Mapping):
            return None
        data = data.get(key)
    return data


def item_url(props: HttpResourceProperties, item_id: str) -> str:
    """`{url}/{id}`: the id (quoted) becomes one more path segment; a query string of
    `url` stays a query string, so nothing in `url` can swallow the id."""
    parts = urlsplit(props.url)
    path = f"{parts.path.rstrip('/')}/{quote(item_id, safe='')}"
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))


def merge_patch(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """RFC 7396 patch turning top-level `old` into `new`: changed keys, removed = null."""
    patch = {k: v for k, v in new.items() if old.get(k, object()) != v}
    patch.update({k: None for k in old if k not in new})
    return patch


def replacing_keys(old: HttpResourceProperties, new: HttpResourceProperties) -> list[str]:
    """Body keys listed in `replace_on_change` whose value differs."""
    keys = dict.fromkeys([*old.replace_on_change, *new.replace_on_change])
    return [k for k in keys if old.body.get(k) != new.body.get(k)]


def state_of(props: HttpResourceProperties, status: Any) -> ObservedState:
    """Ready / failed / in progress from the item's status value. Pure."""
    if props.status_field is None:
        return ObservedState.READY
    text = str(status).upper() if status is not None else ""
    if text in {v.upper() for v in props.failed_values}:
        return ObservedState.FAILED
    if text in {v.upper() for v in props.ready_values}:
        return ObservedState.READY
    return ObservedState.IN_PROGRESS


class HttpResource(ResourceType):
    type_name = "Converge::HTTP::Resource"
    description = "An item of any REST API: POST to create, PUT/PATCH to update, DELETE."
    properties = HttpResourceProperties
    attributes = {
        "id": "The item's id, from the create response.",
        "status": "The item's status_field value when last seen.",
        "body": "The last JSON seen for the item; get_attr [r, body, key, ...] reads into it.",
    }
    attribute_types = {"id": "String", "status": "String", "body": "Map"}
    support_version = "0.1.0"

    async def create(self, ctx: ActionContext, props: Properties) -> ActionResult:
        mine = as_props(props, HttpResourceProperties)
        response = await _call(ctx, mine, "POST", mine.url, body=mine.body)
        data = response.json()
        item_id = dig(data, mine.id_field)
        if item_id is None or isinstance(item_id, dict | list):
            raise PermanentError(
                f"POST {mine.url} returned {response.status} without an id in field "
                f"{mine.id_field!r} (set id_field to the field holding it)"
            )
        physical_id = str(item_id)
        outcome = Outcome.IN_PROGRESS if mine.status_field else Outcome.COMPLETE
        return ActionResult(physical_id, outcome, _attributes(physical_id, mine, data))

    async def update(
        self, ctx: ActionContext, physical_id: str, old: Properties, new: Properties
    ) -> ActionResult:
        before = as_props(old, HttpResourceProperties)
        after = as_props(new, HttpResourceProperties)
        changed = replacing_keys(before, after)
        if changed:
            raise ReplacementNeeded(f"{ctx.resource_name}: body keys {changed} force replacement")
        url = item_url(after, physical_id)
        if before.body == after.body:
            response = await _call(ctx, after, "GET", url, gone_ok=True)
        elif after.update_method == "PATCH":
            patch = merge_patch(before.body, after.body)
            response = await _call(ctx, after, "PATCH", url, body=patch, gone_ok=True)
        else:
            response = await _call(ctx, after, "PUT", url, body=after.body, gone_ok=True)
        if response.status in GONE_STATUSES:
            raise ResourceGone(f"{response.method} {url} returned {response.status}: the item is gone")
        data = response.json()
        if not isinstance(data, dict):  # e.g. 204 No Content: the item is what we sent
            data = dict(after.body)
        outcome = Outcome.IN_PROGRESS if after.status_field else Outcome.COMPLETE
        return ActionResult(physical_id, outcome, _attributes(physical_id, after, data))

    async def delete(self, ctx: ActionContext, physical_id: str, props: Properties) -> ActionResult:
        mine = as_props(props, HttpResourceProperties)
        url = item_url(mine, physical_id)
        response = await _call(ctx, mine, "DELETE", url, gone_ok=True)
        if response.status in GONE_STATUSES:
            return ActionResult(physical_id)
        waiting = mine.status_field is not None or response.status == 202
        return ActionResult(physical_id, Outcome.IN_PROGRESS if waiting else Outcome.COMPLETE)

    async def observe(self, ctx: ActionContext, physical_id: str, props: Properties) -> Observation:
        mine = as_props(props, HttpResourceProperties)
        response = await _call(ctx, mine, "GET", item_url(mine, physical_id), gone_ok=True)
        if response.status in GONE_STATUSES:
            return Observation(ObservedState.GONE)
        data = response.json()
        attributes = _attributes(physical_id, mine, data)
        state = state_of(mine, attributes["status"])
        reason = f"{mine.status_field} is {attributes['status']}" if mine.status_field else ""
        actual = None
        if isinstance(data, dict):
            actual = {"body": {k: data[k] for k in mine.body if k in data}}
        return Observation(state, attributes, actual, reason)


def _attributes(physical_id: str, props: HttpResourceProperties, data: Any) -> dict[str, Any]:
    status = dig(data, props.status_field) if props.status_field else None
    return {"id": physical_id, "status": status, "body": data}


async def _call(
    ctx: ActionContext,
    props: HttpResourceProperties,
    method: str,
    url: str,
    *,
    body: Any = None,
    gone_ok: bool = False,
) -> HttpResponse:
    """One request through the gateway; statuses mapped to the error tree."""
    if not isinstance(ctx.http, HttpClient):
        raise PermanentError(f"{ctx.resource_name}: outbound HTTP is not available in this process")
    remaining = ctx.deadline - ctx.clock()
    if remaining <= 0:
        raise TransientError(f"{method} {url}: the action's deadline has passed")
    headers = {"Accept": "application/json", **props.headers}
    if method != "GET":
        headers["Idempotency-Key"] = ctx.idempotency_key
    response = await ctx.http.request(
        method, url, json=body, headers=headers, time_limit=min(props.timeout, remaining)
    )
    if gone_ok and response.status in GONE_STATUSES:
        return response
    error = error_for(response, now=ctx.clock())
    if error is not None:
        raise error
    return response
