"""Sandbox::* resource types: Converge managing the sandbox cloud over its HTTP API.

Where it sits: loaded through the `converge.resources` entry points by every
service; the engine uses the declarations (the property schemas are the
cloud's own `specs`, so the engine's replace-or-update decision follows the
cloud's rules), the worker runs create/update/delete and the observer
`observe`. All traffic goes through `ctx.http` (the allow-listed gateway)
to `ctx.endpoints["sandbox"]` (CONVERGE_SANDBOX_URL, or `converge up`'s own
in-process sandbox).

- create: POST with the action's idempotency key (`Idempotency-Key`), so a
  redelivered create returns the resource the first delivery made; IN_PROGRESS
  while the resource is in BUILD (the observer then polls `observe`);
- update: ReplacementNeeded when a replace-only field changed or a grow-only
  field shrank, ResourceGone when the resource no longer exists (it is created
  anew); else PATCH of the changed fields, IN_PROGRESS while it rebuilds;
- delete: DELETE; 404 means already gone; deletion is immediate;
- observe: GET; ACTIVE = READY, BUILD = IN_PROGRESS, ERROR = FAILED,
  404 = GONE; reports the actual property values for drift detection.

`Sandbox::Alarm` manages a sandbox alarm (`alarms.py`), not a cloud resource:
created at once (idempotently), replaced by any change, gone when the sandbox
no longer has it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar
from urllib.parse import quote

from services.sandbox.alarms import AlarmSpec
from services.sandbox.specs import (
    Kind,
    NetworkSpec,
    ServerSpec,
    Status,
    SubnetSpec,
    ThingSpec,
    VolumeAttachmentSpec,
    VolumeSpec,
    changed_fields,
    replacing_fields,
)
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
)
from shared.plugins.builtin.common import KeyedRandom, as_props
from shared.settings import SANDBOX_ENDPOINT, SANDBOX_URL_VARIABLE

REQUEST_SECONDS = 30.0
GONE = 404

_NAME = ("The display name.", "String")
_COMMON_ATTRIBUTES = {
    "id": ("The resource's id in the sandbox.", "String"),
    "status": ("BUILD, ACTIVE or ERROR, when last seen.", "String"),
    "show": ("Everything the sandbox shows about the resource.", "Map"),
}


def state_of(status: Any) -> ObservedState:
    """The observed state a sandbox status means. Pure."""
    if status == Status.ACTIVE.value:
        return ObservedState.READY
    if status == Status.ERROR.value:
        return ObservedState.FAILED
    return ObservedState.IN_PROGRESS


def outcome_of(status: Any) -> Outcome:
    """Complete when ACTIVE; anything else is for the observer to settle."""
    return Outcome.COMPLETE if status == Status.ACTIVE.value else Outcome.IN_PROGRESS


class SandboxResource(ResourceType):
    """The behaviour every Sandbox::* type shares; subclasses name the kind."""

    kind: ClassVar[Kind]
    support_version = "0.1.0"
    extra_attributes: ClassVar[Mapping[str, tuple[str, str]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        declared = {**_COMMON_ATTRIBUTES, **cls.extra_attributes}
        cls.attributes = {name: text for name, (text, _) in declared.items()}
        cls.attribute_types = {name: heat_type for name, (_, heat_type) in declared.items()}

    async def create(self, ctx: ActionContext, props: Properties) -> ActionResult:
        spec = as_props(props, self.properties)
        response = await _call(
            ctx, "POST", self._collection_url(ctx), body=spec.model_dump(mode="json"), idempotent=True
        )
        data = _object(response)
        return ActionResult(str(data["id"]), outcome_of(data.get("status")), self._attributes(data))

    async def update(
        self, ctx: ActionContext, physical_id: str, old: Properties, new: Properties
    ) -> ActionResult:
        before, after = as_props(old, self.properties), as_props(new, self.properties)
        blocked = replacing_fields(self.kind, before, after)
        if blocked:
            raise ReplacementNeeded(
                f"{ctx.resource_name}: {', '.join(blocked)} of a {self.kind.value} cannot change in place"
            )
        url = self._item_url(ctx, physical_id)
        changed = changed_fields(before, after)
        if changed:
            values = after.model_dump(mode="json")
            response = await _call(ctx, "PATCH", url, body={n: values[n] for n in changed}, gone_ok=True)
        else:
            response = await _call(ctx, "GET", url, gone_ok=True)
        if response.status == GONE:
            raise ResourceGone(
                f"{ctx.resource_name}: {self.kind.value} {physical_id} no longer exists in the sandbox"
            )
        data = _object(response)
        return ActionResult(physical_id, outcome_of(data.get("status")), self._attributes(data))

    async def delete(self, ctx: ActionContext, physical_id: str, props: Properties) -> ActionResult:
        await _call(ctx, "DELETE", self._item_url(ctx, physical_id), gone_ok=True)
        return ActionResult(physical_id)

    async def observe(self, ctx: ActionContext, physical_id: str, props: Properties) -> Observation:
        response = await _call(ctx, "GET", self._item_url(ctx, physical_id), gone_ok=True)
        if response.status == GONE:
            return Observation(ObservedState.GONE, reason=f"{self.kind.value} {physical_id} does not exist")
        data = _object(response)
        status = data.get("status")
        state = state_of(status)
        reason = ""
        if state is ObservedState.FAILED:
            detail = data.get("status_reason") or "no reason given"
            reason = f"{self.kind.value} {physical_id} is in ERROR: {detail}"
        actual = {name: data[name] for name in self.properties.model_fields if name in data}
        return Observation(state, self._attributes(data), actual, reason)

    # -- helpers -------------------------------------------------------------

    def _attributes(self, data: Mapping[str, Any]) -> dict[str, Any]:
        out = {name: data.get(name) for name in self.attributes if name != "show"}
        out["show"] = dict(data)
        return out

    def _collection_url(self, ctx: ActionContext) -> str:
        base = ctx.endpoints.get(SANDBOX_ENDPOINT)
        if not base:
            raise PermanentError(
                f"{ctx.resource_name}: {self.type_name} needs the sandbox cloud, but no sandbox endpoint "
                f"is configured; set {SANDBOX_URL_VARIABLE} (e.g. http://127.0.0.1:8007) for the worker "
                "and observer"
            )
        return f"{base.rstrip('/')}/v1/{self.kind.collection}"

    def _item_url(self, ctx: ActionContext, physical_id: str) -> str:
        return f"{self._collection_url(ctx)}/{quote(physical_id, safe='')}"


def _object(response: HttpResponse) -> dict[str, Any]:
    data = response.json()
    if not isinstance(data, dict) or "id" not in data:
        raise PermanentError(
            f"{response.method} {response.url} returned {response.status} without a resource"
        )
    return data


async def _call(
    ctx: ActionContext,
    method: str,
    url: str,
    *,
    body: Any = None,
    idempotent: bool = False,
    gone_ok: bool = False,
) -> HttpResponse:
    """One request through the gateway, bounded by the action's deadline; statuses mapped
    to the error tree (409 conflicts and 400s are permanent, 5xx transient)."""
    if not isinstance(ctx.http, HttpClient):
        raise PermanentError(f"{ctx.resource_name}: outbound HTTP is not available in this process")
    remaining = ctx.deadline - ctx.clock()
    if remaining <= 0:
        raise TransientError(f"{method} {url}: the action's deadline has passed")
    headers = {"Accept": "application/json"}
    if idempotent:
        headers["Idempotency-Key"] = ctx.idempotency_key
    response = await ctx.http.request(
        method, url, json=body, headers=headers, time_limit=min(REQUEST_SECONDS, remaining)
    )
    if gone_ok and response.status == GONE:
        return response
    error = error_for(response, now=ctx.clock())
    if error is not None:
        raise error
    return response


class SandboxNetwork(SandboxResource):
    type_name = "Sandbox::Network"
    description = "A network in the sandbox cloud; subnets and servers plug into it."
    kind = Kind.NETWORK
    properties = NetworkSpec
    extra_attributes = {"name": _NAME, "subnets": ("Ids of the network's subnets.", "List")}


class SandboxSubnet(SandboxResource):
    type_name = "Sandbox::Subnet"
    description = "An address range of a sandbox network; servers get their addresses from it."
    kind = Kind.SUBNET
    properties = SubnetSpec
    extra_attributes = {
        "name": _NAME,
        "cidr": ("The address range.", "String"),
        "gateway_ip": ("The gateway address (the range's first host).", "String"),
        "network": ("Id of the network.", "String"),
    }


class SandboxServer(SandboxResource):
    type_name = "Sandbox::Server"
    description = "A virtual server in the sandbox cloud."
    kind = Kind.SERVER
    properties = ServerSpec
    extra_attributes = {
        "name": _NAME,
        "first_address": ("The server's first IP address (null without networks).", "String"),
        "addresses": ("IP addresses by network id.", "Map"),
        "networks": ("Ids of the networks the server is plugged into.", "List"),
        "image": ("The image the server runs.", "String"),
        "flavor": ("The server's size.", "String"),
        "volumes": ("Ids of the volumes attached to it.", "List"),
        "agent_token": (
            "The token of the server's configuration agent: it reads the server's software "
            "deployments and signals them (null where no Converge API URL is known).",
            "String",
        ),
    }

    async def create(self, ctx: ActionContext, props: Properties) -> ActionResult:
        """Create the server, then give it its configuration agent (services/sandbox/agent.py):
        Converge's API for the project and a token of its own, the same on a redelivery."""
        made = await super().create(ctx, props)
        if not ctx.api_url or made.physical_id is None:
            return made
        token = KeyedRandom(ctx.idempotency_key, "agent-token").hex(24)
        api = f"{ctx.api_url.rstrip('/')}/v1/{quote(ctx.project_id, safe='')}"
        url = f"{self._item_url(ctx, made.physical_id)}/agent"
        response = await _call(ctx, "PUT", url, body={"api": api, "token": token})
        return ActionResult(made.physical_id, made.outcome, self._attributes(_object(response)))


class SandboxVolume(SandboxResource):
    type_name = "Sandbox::Volume"
    description = "A block storage volume in the sandbox cloud."
    kind = Kind.VOLUME
    properties = VolumeSpec
    extra_attributes = {
        "name": _NAME,
        "size": ("Size in GiB.", "Integer"),
        "attached_to": ("Id of the server it is attached to, or null.", "String"),
    }


class SandboxVolumeAttachment(SandboxResource):
    type_name = "Sandbox::VolumeAttachment"
    description = "A sandbox volume attached to a sandbox server."
    kind = Kind.VOLUME_ATTACHMENT
    properties = VolumeAttachmentSpec
    extra_attributes = {
        "server": ("Id of the server.", "String"),
        "volume": ("Id of the volume.", "String"),
        "mountpoint": ("Device name on the server.", "String"),
    }


class SandboxThing(SandboxResource):
    type_name = "Sandbox::Thing"
    description = (
        "A generic sandbox resource with free-form data; build_seconds and fail make slow or "
        "failing resources on purpose."
    )
    kind = Kind.THING
    properties = ThingSpec
    extra_attributes = {
        "name": _NAME,
        "data": ("The thing's free-form data; get_attr [thing, data, key] reads into it.", "Map"),
        "fixed": ("The thing's replace-on-change data.", "Map"),
    }


class SandboxAlarm(ResourceType):
    """A sandbox alarm (services/sandbox/alarms.py) on the average load of the servers
    matching its metadata; its actions are typically a scaling policy's signal URL and
    token, so a template wires its own autoscaling (as Heat's with OS::Aodh::Alarm).
    Created with the action's Idempotency-Key; any change replaces it (a new alarm first);
    it reports no property values, so drift is only its disappearance."""

    type_name = "Sandbox::Alarm"
    description = (
        "An alarm on sandbox servers' average load that POSTs signal URLs when it crosses a threshold."
    )
    properties = AlarmSpec
    attributes = {
        "id": "The alarm's id in the sandbox.",
        "state": "ok, alarm or insufficient data, when last seen.",
        "average": "The average load it last saw.",
    }
    attribute_types = {"id": "String", "state": "String", "average": "Number"}
    support_version = "0.1.0"

    async def create(self, ctx: ActionContext, props: Properties) -> ActionResult:
        spec = as_props(props, AlarmSpec)
        url = _alarms_url(ctx, self.type_name)
        response = await _call(ctx, "POST", url, body=spec.model_dump(mode="json"), idempotent=True)
        data = _object(response)
        return ActionResult(str(data["id"]), attributes=_alarm_attributes(data))

    async def update(
        self, ctx: ActionContext, physical_id: str, old: Properties, new: Properties
    ) -> ActionResult:
        raise ReplacementNeeded(f"{ctx.resource_name}: a sandbox alarm is replaced to change it")

    async def delete(self, ctx: ActionContext, physical_id: str, props: Properties) -> ActionResult:
        await _call(ctx, "DELETE", _alarm_url(ctx, self.type_name, physical_id), gone_ok=True)
        return ActionResult(physical_id)

    async def observe(self, ctx: ActionContext, physical_id: str, props: Properties) -> Observation:
        response = await _call(ctx, "GET", _alarm_url(ctx, self.type_name, physical_id), gone_ok=True)
        if response.status == GONE:
            return Observation(ObservedState.GONE, reason=f"alarm {physical_id} does not exist")
        return Observation(ObservedState.READY, _alarm_attributes(_object(response)))


def _alarm_attributes(data: Mapping[str, Any]) -> dict[str, Any]:
    return {"id": data.get("id"), "state": data.get("state"), "average": data.get("average")}


def _alarms_url(ctx: ActionContext, type_name: str) -> str:
    base = ctx.endpoints.get(SANDBOX_ENDPOINT)
    if not base:
        raise PermanentError(
            f"{ctx.resource_name}: {type_name} needs the sandbox cloud, but no sandbox endpoint is "
            f"configured; set {SANDBOX_URL_VARIABLE} (e.g. http://127.0.0.1:8007) for the worker and observer"
        )
    return f"{base.rstrip('/')}/v1/alarms"


def _alarm_url(ctx: ActionContext, type_name: str, physical_id: str) -> str:
    return f"{_alarms_url(ctx, type_name)}/{quote(physical_id, safe='')}"
