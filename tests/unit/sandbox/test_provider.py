"""Proves the Sandbox::* types drive the sandbox cloud: create with the idempotency key,
in-place update or ReplacementNeeded, delete, observe with actual values.
Real: the sandbox's HTTP app on 127.0.0.1, the allow-listed gateway; time is virtual."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest
from prometheus_client import CollectorRegistry

from services.sandbox.app import build_app
from services.sandbox.model import Cloud
from services.sandbox.notify import Notifier, NotifierMetrics
from services.sandbox.provider import (
    SandboxNetwork,
    SandboxResource,
    SandboxServer,
    SandboxSubnet,
    SandboxThing,
    SandboxVolume,
    SandboxVolumeAttachment,
)
from services.sandbox.service import SandboxMetrics, SandboxService
from services.sandbox.specs import Kind
from shared.errors import PermanentError
from shared.health import start_http
from shared.http_client import AllowList, HttpGateway
from shared.plugins import (
    ActionContext,
    ObservedState,
    Outcome,
    Properties,
    ReplacementNeeded,
    ResourceGone,
)
from tests.support.ports import free_port
from tests.unit.plugins.plugin_fakes import CtxFactory, VirtualClock, context_factory

LATENCY = 2.0


@dataclass
class Sandbox:
    service: SandboxService
    clock: VirtualClock
    make_ctx: CtxFactory
    url: str

    def ctx(self, key: str = "job-1", **overrides: Any) -> ActionContext:
        endpoints = {"sandbox": self.url}
        return self.make_ctx(idempotency_key=key, endpoints=endpoints, **overrides)


@pytest.fixture
async def sandbox() -> AsyncIterator[Sandbox]:
    clock = VirtualClock()
    registry = CollectorRegistry()
    service = SandboxService(
        cloud=Cloud(latency=LATENCY, failure_rate=0.0, rng=random.Random(5)),
        notifier=Notifier(None, metrics=NotifierMetrics(registry)),
        metrics=SandboxMetrics(registry),
        clock=clock,
    )
    port = free_port()
    runner = await start_http(build_app(service), host="127.0.0.1", port=port)
    yield Sandbox(service, clock, context_factory(clock), f"http://127.0.0.1:{port}")
    await runner.cleanup()


@pytest.fixture
async def http(sandbox: Sandbox) -> AsyncIterator[HttpGateway]:
    """The real gateway, allowing only the sandbox."""
    async with aiohttp.ClientSession() as session:
        yield HttpGateway(session, AllowList.parse(sandbox.url.removeprefix("http://")))


def spec(cls: type[SandboxResource], **values: Any) -> Properties:
    return cls.properties.model_validate(values)


async def ready(sandbox: Sandbox, ctx: ActionContext, cls: type[SandboxResource], **values: Any) -> str:
    """Create and let the build finish; the physical id."""
    result = await cls().create(ctx, spec(cls, **values))
    assert result.physical_id is not None
    sandbox.clock.advance(LATENCY)
    return result.physical_id


async def test_create_builds_and_observe_reports_ready_with_actual_values(
    sandbox: Sandbox, http: HttpGateway
) -> None:
    ctx = sandbox.ctx(http=http)
    net = await ready(sandbox, ctx, SandboxNetwork, name="net")
    await ready(sandbox, sandbox.ctx("job-2", http=http), SandboxSubnet, network=net, cidr="10.0.0.0/24")
    props = spec(SandboxServer, name="web-1", image="cirros", networks=[net])
    created = await SandboxServer().create(sandbox.ctx("job-3", http=http), props)
    assert created.outcome is Outcome.IN_PROGRESS
    assert created.attributes["status"] == "BUILD"
    assert created.attributes["first_address"] == "10.0.0.2"
    assert created.physical_id is not None
    building = await SandboxServer().observe(ctx, created.physical_id, props)
    assert building.state is ObservedState.IN_PROGRESS
    sandbox.clock.advance(LATENCY)
    seen = await SandboxServer().observe(ctx, created.physical_id, props)
    assert seen.state is ObservedState.READY
    assert seen.attributes["addresses"] == {net: ["10.0.0.2"]}
    assert seen.attributes["show"]["kind"] == "server"
    assert seen.properties == {
        "name": "web-1",
        "image": "cirros",
        "flavor": "m1.small",
        "networks": [net],
        "metadata": {},
    }


async def test_a_redelivered_create_returns_the_same_resource(sandbox: Sandbox, http: HttpGateway) -> None:
    props = spec(SandboxVolume, size=5)
    first = await SandboxVolume().create(sandbox.ctx("job-7", http=http), props)
    again = await SandboxVolume().create(sandbox.ctx("job-7", http=http), props)
    other = await SandboxVolume().create(sandbox.ctx("job-8", http=http), props)
    assert first.physical_id == again.physical_id != other.physical_id
    assert len(sandbox.service.list_kind(Kind.VOLUME)) == 2


@pytest.mark.parametrize(
    ("cls", "old", "new", "outcome"),
    [
        (SandboxServer, {"image": "cirros"}, {"image": "cirros", "name": "renamed"}, Outcome.COMPLETE),
        (SandboxServer, {"image": "cirros"}, {"image": "cirros", "metadata": {"a": "b"}}, Outcome.COMPLETE),
        (SandboxServer, {"image": "cirros"}, {"image": "cirros", "flavor": "m1.large"}, Outcome.IN_PROGRESS),
        (SandboxVolume, {"size": 5}, {"size": 8}, Outcome.IN_PROGRESS),
        (SandboxThing, {"data": {"a": 1}}, {"data": {"a": 1}}, Outcome.COMPLETE),
    ],
)
async def test_in_place_updates_patch_what_changed(
    sandbox: Sandbox,
    http: HttpGateway,
    cls: type[SandboxResource],
    old: dict[str, Any],
    new: dict[str, Any],
    outcome: Outcome,
) -> None:
    ctx = sandbox.ctx(http=http)
    rid = await ready(sandbox, ctx, cls, **old)
    result = await cls().update(sandbox.ctx("job-u", http=http), rid, spec(cls, **old), spec(cls, **new))
    assert (result.physical_id, result.outcome) == (rid, outcome)
    shown = sandbox.service.get(cls.kind, rid)
    assert {k: shown[k] for k in new} == new


@pytest.mark.parametrize(
    ("cls", "old", "new", "message"),
    [
        (SandboxServer, {"image": "cirros"}, {"image": "ubuntu"}, "image of a server cannot change in place"),
        (SandboxVolume, {"size": 5}, {"size": 4}, "size of a volume cannot change in place"),
        (SandboxThing, {"fixed": {"v": 1}}, {"fixed": {"v": 2}}, "fixed of a thing cannot change"),
    ],
)
async def test_changes_the_cloud_cannot_apply_in_place_need_replacement(
    sandbox: Sandbox,
    http: HttpGateway,
    cls: type[SandboxResource],
    old: dict[str, Any],
    new: dict[str, Any],
    message: str,
) -> None:
    ctx = sandbox.ctx(http=http)
    rid = await ready(sandbox, ctx, cls, **old)
    with pytest.raises(ReplacementNeeded, match=message):
        await cls().update(ctx, rid, spec(cls, **old), spec(cls, **new))
    shown = sandbox.service.get(cls.kind, rid)
    assert {k: shown[k] for k in old} == old, "nothing was changed"


async def test_a_resource_deleted_behind_our_back_is_replaced_on_update(
    sandbox: Sandbox, http: HttpGateway
) -> None:
    ctx = sandbox.ctx(http=http)
    rid = await ready(sandbox, ctx, SandboxServer, image="cirros")
    sandbox.service.delete(Kind.SERVER, rid)
    old, new = spec(SandboxServer, image="cirros"), spec(SandboxServer, image="cirros", name="x")
    with pytest.raises(ResourceGone, match="no longer exists"):  # the worker replaces it
        await SandboxServer().update(ctx, rid, old, new)


async def test_delete_is_immediate_and_a_missing_resource_counts_as_deleted(
    sandbox: Sandbox, http: HttpGateway
) -> None:
    ctx = sandbox.ctx(http=http)
    props = spec(SandboxVolume, size=1)
    rid = await ready(sandbox, ctx, SandboxVolume, size=1)
    assert (await SandboxVolume().delete(ctx, rid, props)).outcome is Outcome.COMPLETE
    assert (await SandboxVolume().observe(ctx, rid, props)).state is ObservedState.GONE
    assert (await SandboxVolume().delete(ctx, rid, props)).outcome is Outcome.COMPLETE


async def test_conflicts_and_bad_references_fail_with_the_clouds_message(
    sandbox: Sandbox, http: HttpGateway
) -> None:
    ctx = sandbox.ctx(http=http)
    server = await ready(sandbox, ctx, SandboxServer, image="cirros")
    volume = await ready(sandbox, sandbox.ctx("job-2", http=http), SandboxVolume, size=1)
    await ready(
        sandbox, sandbox.ctx("job-3", http=http), SandboxVolumeAttachment, server=server, volume=volume
    )
    with pytest.raises(PermanentError, match=r"returned 409: cannot delete volume .* still used by"):
        await SandboxVolume().delete(ctx, volume, spec(SandboxVolume, size=1))
    with pytest.raises(PermanentError, match=r"returned 400: .*subnet\.network: no network with id 'nope'"):
        await SandboxSubnet().create(ctx, spec(SandboxSubnet, network="nope", cidr="10.0.0.0/24"))


async def test_out_of_band_changes_show_in_observe(sandbox: Sandbox, http: HttpGateway) -> None:
    ctx = sandbox.ctx(http=http)
    props = spec(SandboxServer, image="cirros", name="web")
    rid = await ready(sandbox, ctx, SandboxServer, image="cirros", name="web")
    sandbox.service.update(Kind.SERVER, rid, {"name": "hacked"})
    seen = await SandboxServer().observe(ctx, rid, props)
    assert (seen.state, seen.properties and seen.properties["name"]) == (ObservedState.READY, "hacked")
    sandbox.service.break_(Kind.SERVER, rid, "host lost")
    broken = await SandboxServer().observe(ctx, rid, props)
    assert broken.state is ObservedState.FAILED
    assert broken.reason == f"server {rid} is in ERROR: host lost"


async def test_a_failing_thing_is_observed_failed(sandbox: Sandbox, http: HttpGateway) -> None:
    ctx = sandbox.ctx(http=http)
    props = spec(SandboxThing, fail=True, build_seconds=1)
    rid = await ready(sandbox, ctx, SandboxThing, fail=True, build_seconds=1)
    seen = await SandboxThing().observe(ctx, rid, props)
    assert seen.state is ObservedState.FAILED
    assert "asked to fail" in seen.reason


async def test_without_a_sandbox_endpoint_the_error_names_the_setting(
    sandbox: Sandbox, http: HttpGateway
) -> None:
    no_endpoints = sandbox.make_ctx(http=http)
    with pytest.raises(PermanentError, match="no sandbox endpoint is configured; set CONVERGE_SANDBOX_URL"):
        await SandboxNetwork().create(no_endpoints, spec(SandboxNetwork))


async def test_a_server_gets_an_agent_with_its_own_token_kept_through_updates(
    sandbox: Sandbox, http: HttpGateway
) -> None:
    ctx = sandbox.ctx("job-agent", http=http, api_url="http://converge.example:8004")
    props = spec(SandboxServer, image="cirros")
    created = await SandboxServer().create(ctx, props)
    assert created.physical_id is not None
    token = created.attributes["agent_token"]
    assert isinstance(token, str)
    assert len(token) == 48
    agent = sandbox.service.agents.get(created.physical_id)
    assert agent is not None
    assert (agent.api, agent.token) == ("http://converge.example:8004/v1/proj1", token)
    again = await SandboxServer().create(ctx, props)  # a redelivered create: same server, same token
    assert (again.physical_id, again.attributes["agent_token"]) == (created.physical_id, token)
    sandbox.clock.advance(LATENCY)
    renamed = spec(SandboxServer, image="cirros", name="renamed")
    updated = await SandboxServer().update(ctx, created.physical_id, props, renamed)
    assert updated.attributes["agent_token"] == token, "an update keeps the agent's token"
    await SandboxServer().delete(ctx, created.physical_id, renamed)
    assert sandbox.service.agents.get(created.physical_id) is None


async def test_an_agent_is_refused_for_no_server_or_a_bad_api(sandbox: Sandbox) -> None:
    from shared.errors import InvalidInput, NotFound

    volume = sandbox.service.create(Kind.VOLUME, {"size": 1}, idempotency_key=None).resource["id"]
    with pytest.raises(NotFound):
        sandbox.service.set_agent(volume, {"api": "http://x/v1/p", "token": "t"})
    server = sandbox.service.create(Kind.SERVER, {"image": "cirros"}, idempotency_key=None).resource["id"]
    with pytest.raises(InvalidInput, match="api"):
        sandbox.service.set_agent(server, {"api": "file:///etc/passwd", "token": "t"})
    with pytest.raises(InvalidInput, match="token"):
        sandbox.service.set_agent(server, {"api": "http://x/v1/p", "token": ""})
