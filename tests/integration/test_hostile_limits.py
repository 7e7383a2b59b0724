"""Hostile requests meet limits: hidden values stay masked (M3), signals are bounded (M4),
resource reads of a large stack stay cheap (H2), live streams are capped (L2), and
mark-unhealthy is refused while a resource is busy (L3).

Real: one `converge up` process for the module (tests/support/hostile.py: the test's
PostgreSQL, the in-process bus and sandbox, tokens of projects alpha and beta), driven
over real HTTP; the abusive requests run while /healthz latency and the server's RSS
are probed. Limits are set small where a test fills one.
"""

from __future__ import annotations

import asyncio
import io
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio

from tests.conftest import DB_URL, RUN_ID
from tests.support.databases import create_database, drop_database
from tests.support.hostile import ALPHA, BETA, Api, Server, probing, start_server
from tests.support.waiting import eventually

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="module")]

TA, TB = ALPHA[0], BETA[0]
HOT = "2018-08-31"
SECRET = "PASSWD-XYZZY-4711"
PER_HANDLE = 5
STREAMS = 3
#: Resources of the large stack: a few times the old O(n^2) reads' pain threshold, quick to create.
LARGE = 3000


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def server(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Server]:
    name = f"converge_test_{RUN_ID}_limits_{uuid.uuid4().hex[:6]}"
    url = await create_database(DB_URL, name)
    env = {
        "CONVERGE_MAX_SIGNALS_PER_HANDLE": str(PER_HANDLE),
        "CONVERGE_MAX_STREAMS_PER_TOKEN": str(STREAMS),
        "CONVERGE_MAX_EVENTS_PER_STACK": "0",  # the large stack's whole history is replayed
    }
    try:
        async with start_server(Path(tmp_path_factory.mktemp("limits")), url, env=env) as running:
            yield running
    finally:
        await drop_database(DB_URL, name)


@pytest_asyncio.fixture(loop_scope="module")
async def api(server: Server) -> AsyncIterator[Api]:
    async with aiohttp.ClientSession() as http:
        yield Api(http, server.base)


async def create(api: Api, name: str, template: dict[str, Any], token: str = TA, **body: Any) -> str:
    """Create a stack in alpha (or beta); its URL path."""
    project = "alpha" if token == TA else "beta"
    made = await api.call(
        "POST", f"/v1/{project}/stacks", token=token, json={"stack_name": name, "template": template, **body}
    )
    assert made.status == 201, made.body
    return f"/v1/{project}/stacks/{name}/{made.body['stack']['id']}"


async def settled(api: Api, path: str, token: str = TA) -> str:
    async def ended() -> str | None:
        status = str((await api.call("GET", path, token=token)).body["stack"]["stack_status"])
        return None if status.endswith("IN_PROGRESS") else status

    return await eventually(ended, timeout=120, every=0.1)


async def a_normal_stack_still_creates(api: Api) -> None:
    path = await create(
        api, f"normal-{uuid.uuid4().hex[:6]}", {"heat_template_version": HOT, "resources": {}}
    )
    assert await settled(api, path) == "CREATE_COMPLETE"


# -- M3: hidden parameters ------------------------------------------------------


def hidden_template(resources: dict[str, Any]) -> dict[str, Any]:
    return {
        "heat_template_version": HOT,
        "parameters": {"pw": {"type": "string", "hidden": True}, "pw2": {"type": "string", "hidden": True}},
        "resources": resources,
    }


async def test_the_environment_masks_hidden_parameters_and_parameter_defaults(
    api: Api, server: Server
) -> None:
    template = hidden_template({"v": {"type": "OS::Heat::Value", "properties": {"value": "plain"}}})
    path = await create(
        api,
        "env-secret",
        template,
        parameters={"pw": SECRET},
        environment={"parameters": {"pw2": f"{SECRET}-2"}, "parameter_defaults": {"pw": f"{SECRET}-d"}},
    )
    assert await settled(api, path) == "CREATE_COMPLETE"
    environment = (await api.call("GET", f"{path}/environment", token=TA)).body
    assert environment["parameters"] == {"pw2": "******"}
    assert environment["parameter_defaults"] == {"pw": "******"}
    shown = (await api.call("GET", path, token=TA)).body["stack"]["parameters"]
    assert (shown["pw"], shown["pw2"]) == ("******", "******")
    assert not any(SECRET in line for line in server.process.lines), "never in the logs"


async def test_observation_and_resource_views_mask_a_drifted_value_from_a_hidden_parameter(
    api: Api, server: Server
) -> None:
    template = hidden_template(
        {"thing": {"type": "Sandbox::Thing", "properties": {"name": {"get_param": "pw"}, "build_seconds": 0}}}
    )
    path = await create(api, "drift-secret", template, parameters={"pw": SECRET, "pw2": "x"})
    assert await settled(api, path) == "CREATE_COMPLETE"
    thing = (await api.call("GET", f"{path}/resources/thing", token=TA)).body["resource"]
    started = await api.call("POST", f"{path}/actions", token=TA, json={"observe_start": {"interval": 1}})
    assert started.status == 200
    changed = await api.call(
        "PATCH",
        f"/sandbox/v1/things/{thing['physical_resource_id']}",
        json={"name": "changed-out-of-band"},
    )
    assert changed.status == 200, changed.body

    async def drifted() -> bool:
        found = (await api.call("GET", f"{path}/observation", token=TA)).body["observation"]["drifted"]
        return bool(found)

    await eventually(drifted, timeout=60)
    observation = (await api.call("GET", f"{path}/observation", token=TA)).body["observation"]
    (drift,) = observation["drifted"]
    assert drift["differences"]["name"] == {"expected": "******", "actual": "changed-out-of-band"}
    assert thing["properties"]["name"] == "******"
    assert SECRET not in json.dumps(thing), "nor in its attributes"
    events = (await api.call("GET", f"{path}/events", token=TA)).body["events"]
    assert SECRET not in json.dumps(events)
    await api.call("POST", f"{path}/actions", token=TA, json={"observe_stop": None})
    assert not any(SECRET in line for line in server.process.lines), "never in the logs"


# -- M4: signals ------------------------------------------------------------------


def waiting_template(count: int) -> dict[str, Any]:
    return {
        "heat_template_version": HOT,
        "resources": {
            "h": {"type": "OS::Heat::WaitConditionHandle"},
            "w": {
                "type": "OS::Heat::WaitCondition",
                "properties": {"handle": {"get_resource": "h"}, "count": count, "timeout": 600},
            },
        },
    }


async def handle_signal_url(api: Api, path: str) -> tuple[str, str]:
    """(signal path, handle token) once the handle exists."""

    async def created() -> tuple[str, str] | None:
        found = await api.call("GET", f"{path}/resources/h", token=TA)
        if found.status == 200 and found.body["resource"]["resource_status"] == "CREATE_COMPLETE":
            attributes = found.body["resource"]["attributes"]
            return attributes["endpoint"].removeprefix(api.base), attributes["token"]
        return None

    return await eventually(created, timeout=60)


async def post_big(api: Api, path: str, token: str, body: bytes) -> tuple[int, Any]:
    """POST a large body (from a file-like object, as aiohttp wants one that big)."""
    async with api.http.post(
        f"{api.base}{path}",
        data=io.BytesIO(body),
        headers={"X-Auth-Token": token, "Content-Type": "application/json"},
    ) as response:
        body = await response.read()
        return response.status, json.loads(body) if response.content_type == "application/json" else body


async def test_big_signals_are_refused_before_they_are_read_and_a_handle_takes_a_bounded_number(
    api: Api, server: Server
) -> None:
    path = await create(api, "signals", waiting_template(count=PER_HANDLE + 5))
    url, token = await handle_signal_url(api, path)
    big = json.dumps({"data": "x" * (1900 * 1024), "reason": "r" * 1000}).encode()

    async def flood() -> list[tuple[int, Any]]:
        return list(await asyncio.gather(*(post_big(api, url, token, big) for _ in range(8))))

    answers, probe = await probing(server, flood())
    probe.assert_healthy()
    assert [status for status, _ in answers] == [413] * 8
    refused = answers[0][1]
    assert refused["code"] == 413
    assert refused["error"]["type"] == "RequestEntityTooLarge"
    assert "CONVERGE_MAX_SIGNAL_BYTES" in refused["error"]["message"]

    long_reason = {"status": "SUCCESS", "reason": "why " * 2500, "data": "small"}
    for _ in range(PER_HANDLE):
        assert (await api.call("POST", url, token=token, json=long_reason)).status == 200
    full = await api.call("POST", url, token=token, json={"data": "one more"})
    assert full.status == 400
    assert f"maximum of {PER_HANDLE} signals" in full.body["error"]["message"]
    handle = (await api.call("GET", f"{path}/resources/h", token=TA)).body["resource"]
    assert len(json.dumps(handle)) < 64 * 1024, "the handle holds a few small signals, nothing more"
    events = (await api.call("GET", f"{path}/resources/h/events", token=TA)).body["events"]
    reasons = [e["resource_status_reason"] for e in events if e["resource_status"] == "SIGNAL_COMPLETE"]
    assert len(reasons) == PER_HANDLE
    assert all(len(r) <= 255 for r in reasons), "reasons are cut before events show them"
    await a_normal_stack_still_creates(api)


async def test_no_signal_is_accepted_once_the_condition_has_completed(api: Api) -> None:
    path = await create(api, "signalled", waiting_template(count=1))
    url, token = await handle_signal_url(api, path)
    assert (await api.call("POST", url, token=token, json={"status": "SUCCESS"})).status == 200
    assert await settled(api, path) == "CREATE_COMPLETE"
    late = await api.call("POST", url, token=token, json={"status": "SUCCESS", "data": "late"})
    assert late.status == 409
    assert late.body["error"]["type"] == "SignalsClosed"
    assert "no wait condition is waiting" in late.body["error"]["message"]


# -- L3: mark unhealthy ---------------------------------------------------------------


async def test_mark_unhealthy_is_refused_while_busy_and_otherwise_recorded(api: Api) -> None:
    template = {
        "heat_template_version": HOT,
        "resources": {
            "quick": {"type": "OS::Heat::None"},
            "slow": {"type": "OS::Heat::TestResource", "properties": {"action_wait_secs": {"create": 600}}},
        },
    }
    path = await create(api, "marks", template)

    async def slow_in_progress() -> bool:
        found = (await api.call("GET", f"{path}/resources/slow", token=TA)).body
        return bool(found["resource"]["resource_status"] == "CREATE_IN_PROGRESS")

    await eventually(slow_in_progress)
    busy = await api.call("PATCH", f"{path}/resources/slow", token=TA, json={"mark_unhealthy": True})
    assert busy.status == 409
    assert busy.body["error"]["type"] == "ActionInProgress"
    assert "already has an action (CREATE) in progress" in busy.body["error"]["message"]
    slow = (await api.call("GET", f"{path}/resources/slow", token=TA)).body["resource"]
    assert slow["resource_status"] == "CREATE_IN_PROGRESS", "the busy row was not touched"

    async def quick_done() -> bool:
        found = (await api.call("GET", f"{path}/resources/quick", token=TA)).body
        return bool(found["resource"]["resource_status"] == "CREATE_COMPLETE")

    await eventually(quick_done)
    body = {"mark_unhealthy": True, "resource_status_reason": "disk smells"}
    assert (await api.call("PATCH", f"{path}/resources/quick", token=TA, json=body)).status == 200
    quick = (await api.call("GET", f"{path}/resources/quick", token=TA)).body["resource"]
    assert (quick["resource_status"], quick["resource_status_reason"]) == ("CHECK_FAILED", "disk smells")
    healthy = {"mark_unhealthy": False, "resource_status_reason": "fixed"}
    assert (await api.call("PATCH", f"{path}/resources/quick", token=TA, json=healthy)).status == 200
    events = (await api.call("GET", f"{path}/resources/quick/events", token=TA)).body["events"]
    assert [(e["resource_status"], e["resource_status_reason"]) for e in events][-2:] == [
        ("CHECK_FAILED", "disk smells"),
        ("CHECK_COMPLETE", "fixed"),
    ]
    await api.call("POST", f"{path}/actions", token=TA, json={"cancel_without_rollback": None})


# -- H2 and L2: a large stack --------------------------------------------------------------


def layered(count: int, width: int = 100) -> dict[str, Any]:
    """`count` OS::Heat::None in layers of `width`, each needing the one above it and that
    one's right-hand neighbour in the layer before."""
    resources: dict[str, Any] = {}
    for i in range(count):
        resource: dict[str, Any] = {"type": "OS::Heat::None"}
        if i >= width:
            above = [i - width] if (i + 1) % width == 0 else [i - width, i - width + 1]
            resource["depends_on"] = [f"r{j}" for j in above]
        resources[f"r{i}"] = resource
    return {"heat_template_version": HOT, "resources": resources}


def required_by(template: dict[str, Any]) -> dict[str, list[str]]:
    """What the API must answer as each resource's `required_by`."""
    found: dict[str, list[str]] = {name: [] for name in template["resources"]}
    for name, resource in template["resources"].items():
        for needed in resource.get("depends_on", []):
            found[needed].append(name)
    return {name: sorted(names) for name, names in found.items()}


async def event_count(api: Api, path: str) -> int:
    """How many events the stack has (paging through them)."""
    count, marker = 0, ""
    while True:
        page = (await api.call("GET", f"{path}/events?limit=1000{marker}", token=TA)).body["events"]
        count += len(page)
        if len(page) < 1000:
            return count
        marker = f"&marker={page[-1]['id']}"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def large(server: Server) -> AsyncIterator[str]:
    async with aiohttp.ClientSession() as http:
        api = Api(http, server.base)
        path = await create(api, "large", layered(LARGE))
        assert await settled(api, path) == "CREATE_COMPLETE"
        yield path


async def test_reads_of_a_large_stack_are_cheap_and_do_not_stall_another_project(
    api: Api, server: Server, large: str
) -> None:
    beta = await create(api, "beta-stack", {"heat_template_version": HOT, "resources": {}}, token=TB)
    assert await settled(api, beta, token=TB) == "CREATE_COMPLETE"
    beta_lists: list[float] = []

    async def read(path: str) -> tuple[int, bytes]:  # not parsed here: the probe shares this loop
        async with api.http.get(f"{api.base}{path}", headers={"X-Auth-Token": TA}) as response:
            return response.status, await response.read()

    async def abuse() -> list[tuple[int, bytes]]:
        reads = [read(f"{large}/resources") for _ in range(12)]
        reads += [read(f"{large}/resources/r1500") for _ in range(12)]
        running = asyncio.gather(*reads)
        while not running.done():  # another project's reads meanwhile
            listed = await api.call("GET", "/v1/beta/stacks", token=TB)
            assert listed.status == 200
            beta_lists.append(listed.seconds)
            await asyncio.sleep(0.05)
        return list(await running)

    answers, probe = await probing(server, abuse())
    probe.assert_healthy()
    assert {status for status, _ in answers} == {200}
    expected = required_by(layered(LARGE))
    listed = json.loads(answers[0][1])["resources"]
    assert {r["resource_name"]: r["required_by"] for r in listed} == expected
    assert json.loads(answers[-1][1])["resource"]["required_by"] == expected["r1500"]
    assert max(beta_lists) < 1.0, f"beta's stack list took {max(beta_lists):.2f}s while alpha read"
    page = await api.call("GET", f"{large}/resources?limit=10&marker=r1500", token=TA)
    assert [r["resource_name"] for r in page.body["resources"]][:2] == ["r1501", "r1502"]
    await a_normal_stack_still_creates(api)


async def read_stream(api: Api, path: str, token: str, *, until: int) -> list[dict[str, Any]]:
    """The stream's `events` messages (each one's data) until `until` events arrived. A 429
    is asked again (bounded): the slot of a stream just closed is given back at the
    server's next poll."""
    messages: list[dict[str, Any]] = []
    seen = 0
    async with asyncio.timeout(30):
        while True:
            response = await api.http.get(
                f"{api.base}{path}/stream?after=0",
                headers={"X-Auth-Token": token},
                timeout=aiohttp.ClientTimeout(120),
            )
            if response.status != 429:
                break
            response.close()
            await asyncio.sleep(0.1)
    async with response:
        assert response.status == 200
        async for raw in response.content:
            line = raw.decode().rstrip("\n")
            if line.startswith("data: ") and line != "data: {}":
                data = json.loads(line.removeprefix("data: "))
                messages.append(data)
                seen += len(data["events"])
                if seen >= until:
                    break
    return messages


async def test_live_streams_are_capped_per_token_and_replay_a_page_per_poll(
    api: Api, server: Server, large: str
) -> None:
    total = await event_count(api, large)
    assert total > 2000, "a long history: many batches to replay"
    opened = [
        await api.http.get(f"{api.base}{large}/stream", headers={"X-Auth-Token": TA}) for _ in range(STREAMS)
    ]
    try:
        assert {r.status for r in opened} == {200}
        over = await api.http.get(f"{api.base}{large}/stream", headers={"X-Auth-Token": TA})
        opened.append(over)  # closed below whatever it answered (an endless stream, before)
        assert over.status == 429
        refused = await over.json()
        assert refused["error"]["type"] == "TooManyRequests"
        assert "CONVERGE_MAX_STREAMS_PER_TOKEN" in refused["error"]["message"]
    finally:
        for response in opened:
            response.close()

    async def replays() -> list[list[dict[str, Any]]]:
        readers = [read_stream(api, large, TA, until=total) for _ in range(STREAMS)]
        return list(await asyncio.gather(*readers))

    messages, probe = await probing(server, replays())
    probe.assert_healthy()
    for stream in messages:
        assert max(len(m["events"]) for m in stream) <= 500, "one events page per poll, never the history"
        assert sum(len(m["events"]) for m in stream) == total
    beta = await api.call("GET", "/v1/beta/stacks", token=TB)
    assert beta.status == 200
