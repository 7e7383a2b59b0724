"""Two projects on one real server: stacks to attack, and what "untouched" means.

Where it sits: the tenant-boundary tests (`tests/integration/test_hostile_tenancy.py`,
`test_hostile_cross_project.py`, `test_hostile_quotas.py`, `test_external_ids.py`)
drive a real `converge up` (`tests.support.hostile.start_server`) over HTTP.
`Tenant` is one project's view of it (its URL prefix and token); `snapshot`
is everything a project can see of one of its stacks, compared before and
after an attack to prove nothing changed.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tests.support.hostile import ADMIN, ALPHA, BETA, Api, Response

HOT = "2018-08-31"


def hot(resources: Mapping[str, Any], outputs: Mapping[str, Any] | None = None) -> dict[str, Any]:
    return {
        "heat_template_version": HOT,
        "resources": dict(resources),
        **({"outputs": outputs} if outputs else {}),
    }


def value(text: str) -> dict[str, Any]:
    return {"type": "OS::Heat::TestResource", "properties": {"value": text}}


def nested_stack(resources: Mapping[str, Any], **extra: Any) -> dict[str, Any]:
    """An OS::Heat::Stack resource whose child holds `resources`; `extra` adds keys (external_id)."""
    return {"type": "OS::Heat::Stack", "properties": {"template": hot(resources)}, **extra}


def unknown_id() -> str:
    return str(uuid.uuid4())


def message(response: Response) -> str:
    body = response.body
    assert isinstance(body, dict), (response.status, body)
    assert "error" in body, (response.status, body)
    return str(body["error"]["message"])


@dataclass
class Tenant:
    api: Api
    project: str
    token: str

    @property
    def stacks(self) -> str:
        return f"/v1/{self.project}/stacks"

    async def call(self, method: str, path: str, **kwargs: Any) -> Response:
        return await self.api.call(method, path, token=self.token, **kwargs)

    async def create(self, name: str, template: Mapping[str, Any], **body: Any) -> str:
        """Create a stack (asserting 201); its id."""
        response = await self.call(
            "POST", self.stacks, json={"stack_name": name, "template": template, **body}
        )
        assert response.status == 201, (response.status, response.body)
        return str(response.body["stack"]["id"])

    async def settled(self, name: str, *, timeout: float = 120) -> str:
        return await self.api.until_settled(self.project, self.token, name, timeout=timeout)

    async def created(self, name: str, template: Mapping[str, Any], **body: Any) -> str:
        """Create a stack and wait until it is CREATE_COMPLETE; its id."""
        stack_id = await self.create(name, template, **body)
        status = await self.settled(name)
        assert status in ("CREATE_COMPLETE", "ADOPT_COMPLETE"), (name, status)
        return stack_id

    async def url(self, name: str) -> str:
        """The canonical URL path of the stack `name` (by id or name)."""
        response = await self.call("GET", f"{self.stacks}/{name}")
        assert response.status == 302, (response.status, response.body)
        location = response.headers["Location"]
        return location[location.index("/v1/") :]

    async def resources(self, name: str) -> dict[str, dict[str, Any]]:
        response = await self.call("GET", f"{await self.url(name)}/resources")
        assert response.status == 200, (response.status, response.body)
        return {r["resource_name"]: r for r in response.body["resources"]}

    async def events(self, name: str, query: str = "") -> list[dict[str, Any]]:
        response = await self.call("GET", f"{await self.url(name)}/events{query}")
        assert response.status == 200, (response.status, response.body)
        return list(response.body["events"])

    async def listed(self, query: str = "") -> list[str]:
        """Names of the stacks the project lists (with `query`)."""
        response = await self.call("GET", f"{self.stacks}{query}")
        assert response.status == 200, (response.status, response.body)
        return [s["stack_name"] for s in response.body["stacks"]]

    async def snapshot(self, stack: str) -> dict[str, Any]:
        """Everything the project sees of the stack (name or id): status, template, resources,
        outputs."""
        url = await self.url(stack)
        shown = await self.call("GET", url)
        assert shown.status == 200, (shown.status, shown.body)
        shown_stack: dict[str, Any] = shown.body["stack"]
        template = (await self.call("GET", f"{url}/template")).body
        resources = (await self.call("GET", f"{url}/resources")).body["resources"]
        return {
            "status": shown_stack["stack_status"],
            "reason": shown_stack["stack_status_reason"],
            "template": template,
            "outputs": sorted(
                (o["output_key"], repr(o.get("output_value"))) for o in shown_stack["outputs"] or []
            ),
            "resources": sorted(
                (r["resource_name"], r["resource_type"], r["physical_resource_id"], r["resource_status"])
                for r in resources
            ),
        }


def tenants(api: Api) -> tuple[Tenant, Tenant, Tenant]:
    """(alpha, beta, admin) on the server `api` talks to."""
    return (
        Tenant(api, ALPHA[1], ALPHA[0]),
        Tenant(api, BETA[1], BETA[0]),
        Tenant(api, ADMIN[1], ADMIN[0]),
    )
