"""Hostile templates cost their sender a clear 400, and nobody else anything.

One regression test per finding of the 2026-11 security review that a template
can cause (C2 ReDoS, C3a-d memory amplification, H4 quadratic list functions),
each with the review's reproduction at a size that hurt the old code: the
request is refused with a 400 naming the function (or constraint), the template
path, the limit and the setting that raises it; while it is in flight the
server's /healthz keeps answering within 100 ms and its memory grows by less
than 100 MiB (`tests.support.hostile.probing`), and so does every template
worker's; afterwards a normal stack still creates.

Real: a `converge up` process (its template pool's worker processes, the
test's PostgreSQL, the in-process bus and sandbox), driven over real HTTP by
two projects' tokens.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
import pytest

from tests.support.hostile import ALPHA, RSS_BOUND, Api, Probe, Response, Server, probing, start_server

T = TypeVar("T")
TOKEN, PROJECT = ALPHA
HOT = "heat_template_version: 2018-08-31\n"
#: A template worker's resident memory stays under this throughout (bytes).
WORKER_RSS_BOUND = 256 * 1024 * 1024


@pytest.fixture
async def server(tmp_path: Path, database_url: str) -> AsyncIterator[Server]:
    async with start_server(tmp_path / "data", database_url) as server:
        yield server


@pytest.fixture
async def api(server: Server) -> AsyncIterator[Api]:
    async with aiohttp.ClientSession() as http:
        yield Api(http, server.base)


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (its template pool's fork server and workers)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, pending = [], [pid]
    while pending:
        for child in children.get(pending.pop(), []):
            found.append(child)
            pending.append(child)
    return found


def rss(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


async def probed(server: Server, request: Awaitable[T]) -> tuple[T, Probe, int]:
    """`probing`, plus the largest resident memory any template worker had meanwhile."""
    largest = 0
    done = asyncio.Event()

    async def watch_workers() -> None:
        nonlocal largest
        while not done.is_set():
            largest = max([largest, *(rss(p) for p in descendants(server.pid))])
            await asyncio.sleep(0.02)

    watcher = asyncio.create_task(watch_workers())
    try:
        result, probe = await probing(server, request)
    finally:
        done.set()
        await watcher
    return result, probe, largest


def assert_refused(response: Response, *fragments: str) -> str:
    assert response.status == 400, (response.status, response.body)
    message: str = response.body["error"]["message"]
    for fragment in fragments:
        assert fragment in message, (fragment, message)
    assert "Traceback" not in message
    return message


async def assert_a_normal_stack_creates(api: Api, name: str = "normal") -> None:
    template = {
        "heat_template_version": "2018-08-31",
        "resources": {
            "v": {"type": "OS::Heat::Value", "properties": {"value": {"list_join": ["-", ["a", "b"]]}}}
        },
    }
    created = await api.call(
        "POST", f"/v1/{PROJECT}/stacks", token=TOKEN, json={"stack_name": name, "template": template}
    )
    assert created.status == 201, created.body
    assert await api.until_settled(PROJECT, TOKEN, name) == "CREATE_COMPLETE"


async def hostile(server: Server, api: Api, path: str, body: dict[str, Any], *fragments: str) -> str:
    """Send an abusive request; check the refusal, the probes and that a normal stack still creates."""
    response, probe, worker_rss = await probed(server, api.call("POST", path, token=TOKEN, json=body))
    message = assert_refused(response, *fragments)
    probe.assert_healthy()
    assert worker_rss < WORKER_RSS_BOUND, f"a template worker reached {worker_rss / 2**20:.0f} MiB"
    return message


# --- C2 -----------------------------------------------------------------------------------

REDOS = HOT + (
    'parameters:\n  p:\n    type: string\n    constraints:\n      - allowed_pattern: "(a+)+b"\n'
    "resources: {}\n"
)


async def test_a_catastrophic_pattern_costs_linear_time_via_validate_and_stacks(
    server: Server, api: Api
) -> None:
    # 28 a's took 10 s on the old code, and every extra one doubled it; 5,000 would never end.
    value = "a" * 5000
    for path, body in (
        (f"/v1/{PROJECT}/validate", {"template": REDOS, "parameters": {"p": value}}),
        (f"/v1/{PROJECT}/stacks", {"stack_name": "redos", "template": REDOS, "parameters": {"p": value}}),
    ):
        await hostile(server, api, path, body, "parameters.p", "does not match pattern", "(a+)+b")
    await assert_a_normal_stack_creates(api)


async def test_a_pattern_only_a_backtracking_engine_runs_is_refused_where_it_is_written(api: Api) -> None:
    template = REDOS.replace("(a+)+b", "(a)\\\\1")
    response = await api.call("POST", f"/v1/{PROJECT}/validate", token=TOKEN, json={"template": template})
    assert_refused(response, "parameters.p.constraints[0].allowed_pattern", "invalid escape sequence", "RE2")


# --- C3a ----------------------------------------------------------------------------------


def alias_bomb(length: int, copies: int) -> str:
    aliases = ", ".join(["*a"] * copies)
    return (
        HOT
        + f"parameters: {{p: {{type: string, default: &a {'x' * length}}}}}\n"
        + f"resources: {{v: {{type: OS::Heat::Value, properties: {{value: [{aliases}]}}}}}}\n"
    )


async def test_aliases_of_a_long_scalar_are_refused_before_they_are_expanded(
    server: Server, api: Api
) -> None:
    # 108 KB that the old code expanded to 200 MB (461 MB peak) before refusing it.
    template = alias_bomb(100_000, 2000)
    for path, body in (
        (f"/v1/{PROJECT}/validate", {"template": template}),
        (f"/v1/{PROJECT}/stacks", {"stack_name": "aliases", "template": template}),
    ):
        await hostile(
            server,
            api,
            path,
            body,
            "template expands to more than 1048576 bytes with its YAML aliases",
            "CONVERGE_MAX_TEMPLATE_BYTES",
        )
    await assert_a_normal_stack_creates(api)


# --- C3b ----------------------------------------------------------------------------------


async def test_str_replace_cannot_build_a_huge_string(server: Server, api: Api) -> None:
    # A 30 KB request the old code accepted (201), building a 225 MB value and a 3.1 GB peak.
    template = HOT + (
        "resources:\n  v:\n    type: OS::Heat::Value\n    properties:\n      value:\n"
        f"        str_replace: {{template: {'a' * 15_000}, params: {{a: {'b' * 15_000}}}}}\n"
    )
    await hostile(
        server,
        api,
        f"/v1/{PROJECT}/stacks",
        {"stack_name": "replace", "template": template},
        "resources.v.properties.value.str_replace: str_replace would produce 225000000 bytes",
        "16777216 bytes; raise it with CONVERGE_MAX_EVALUATION_BYTES",
    )
    listed = await api.call("GET", f"/v1/{PROJECT}/stacks?name=replace", token=TOKEN)
    assert listed.body["stacks"] == []  # nothing was created
    await assert_a_normal_stack_creates(api)


# --- C3c ----------------------------------------------------------------------------------


async def test_repeat_is_refused_before_its_product_is_built(server: Server, api: Api) -> None:
    # 2 KB asking for 3.4 million items: 286 MB and 1.1 s of blocked /healthz on the old code.
    numbers = list(range(150))
    template = {
        "heat_template_version": "2018-08-31",
        "resources": {
            "v": {
                "type": "OS::Heat::Value",
                "properties": {
                    "value": {
                        "repeat": {
                            "for_each": {"X": numbers, "Y": numbers, "Z": numbers},
                            "template": "X-Y-Z",
                        }
                    }
                },
            }
        },
    }
    await hostile(
        server,
        api,
        f"/v1/{PROJECT}/validate",
        {"template": template},
        "resources.v.properties.value.repeat: repeat would produce 3375000 items",
        "200000 items; raise it with CONVERGE_MAX_EVALUATION_ITEMS",
    )
    await assert_a_normal_stack_creates(api)


# --- C3d ----------------------------------------------------------------------------------


def group(count: Any) -> dict[str, Any]:
    return {
        "heat_template_version": "2018-08-31",
        "resources": {
            "n": {"type": "OS::Heat::Value", "properties": {"value": 1_000_000}},
            "g": {
                "type": "OS::Heat::ResourceGroup",
                "properties": {"count": count, "resource_def": {"type": "OS::Heat::None"}},
            },
        },
    }


async def test_a_group_count_is_checked_before_its_members_are_built(server: Server, api: Api) -> None:
    # 174 bytes: the old engine built the million-member template (495 MB, 1.8 s) in a message handler.
    await hostile(
        server,
        api,
        f"/v1/{PROJECT}/stacks",
        {"stack_name": "group", "template": group(100_000_000)},
        "resources.g.properties.count",
        "100000000 members are more than a stack may hold",
        "max_resources 100000; raise it with CONVERGE_MAX_RESOURCES_PER_STACK",
    )
    # Known only when the stack converges: the nested resource fails with the same reason.
    dynamic = group({"get_attr": ["n", "value"]})
    response, probe, worker_rss = await probed(
        server,
        api.call(
            "POST", f"/v1/{PROJECT}/stacks", token=TOKEN, json={"stack_name": "late", "template": dynamic}
        ),
    )
    assert response.status == 201, response.body
    assert await api.until_settled(PROJECT, TOKEN, "late") == "CREATE_FAILED"
    location = (await api.call("GET", f"/v1/{PROJECT}/stacks/late", token=TOKEN)).headers["Location"]
    shown = await api.call("GET", location.removeprefix(server.base) + "/resources/g", token=TOKEN)
    reason = shown.body["resource"]["resource_status_reason"]
    assert "1000000 members are more than a stack may hold" in reason, reason
    assert "CONVERGE_MAX_RESOURCES_PER_STACK" in reason
    probe.assert_healthy()
    assert worker_rss < WORKER_RSS_BOUND
    await assert_a_normal_stack_creates(api)


# --- H4 -----------------------------------------------------------------------------------


@pytest.mark.parametrize("function", ["list_concat_unique", "filter"])
async def test_list_functions_are_linear(server: Server, api: Api, function: str) -> None:
    # 15,000 numbers blocked /healthz for 1.6 s on the old code; 40,000 take about 20 s.
    numbers = list(range(40_000))
    args = [numbers, numbers] if function == "list_concat_unique" else [numbers[::2], numbers]
    template = {
        "heat_template_version": "2018-08-31",
        "resources": {"v": {"type": "OS::Heat::Value", "properties": {"value": {function: args}}}},
        "outputs": {"n": {"value": {"get_attr": ["v", "value"]}}},
    }
    response, probe, worker_rss = await probed(
        server, api.call("POST", f"/v1/{PROJECT}/validate", token=TOKEN, json={"template": template})
    )
    assert response.status == 200, response.body
    probe.assert_healthy()
    assert worker_rss < WORKER_RSS_BOUND
    await assert_a_normal_stack_creates(api)


# --- the pool's own limits ----------------------------------------------------------------


async def test_work_past_the_time_limit_is_stopped_and_the_pool_goes_on(
    tmp_path: Path, database_url: str
) -> None:
    # Every size limit raised out of the way: 10,000 resources (YAML aliases of one), each
    # joining a 1,000-item repeat, are about 20 s of work; the limit is half a second.
    env = {
        "CONVERGE_TEMPLATE_TIMEOUT_SECONDS": "0.5",
        "CONVERGE_MAX_TEMPLATE_BYTES": str(64 * 1024 * 1024),
        "CONVERGE_MAX_EVALUATION_ITEMS": str(100_000_000),
        "CONVERGE_MAX_EVALUATION_BYTES": str(1024 * 1024 * 1024),
    }
    numbers = ", ".join(str(i) for i in range(1000))
    template = HOT + (
        f"parameters: {{n: {{type: json, default: [{numbers}]}}}}\n"
        "resources:\n"
        '  r0: &d {type: OS::Heat::Value, properties: {value: {list_join: [",", '
        '{repeat: {for_each: {"%x%": {get_param: n}}, template: "%x%-%x%"}}]}}}\n'
        + "".join(f"  r{i}: *d\n" for i in range(1, 10_000))
    )
    async with (
        start_server(tmp_path / "data", database_url, env=env) as server,
        aiohttp.ClientSession() as http,
    ):
        api = Api(http, server.base)
        response, probe, _ = await probed(
            server,
            api.call(
                "POST",
                f"/v1/{PROJECT}/stacks",
                token=TOKEN,
                json={"stack_name": "slow", "template": template},
            ),
        )
        assert_refused(response, "took longer than 0.5 s", "CONVERGE_TEMPLATE_TIMEOUT_SECONDS", "stopped")
        probe.assert_healthy()
        await assert_a_normal_stack_creates(api)


async def test_a_worker_cannot_take_the_machines_memory(tmp_path: Path, database_url: str) -> None:
    # With the budget raised out of the way, the worker's address-space cap is what stops it.
    env = {
        "CONVERGE_TEMPLATE_WORKER_MEMORY_BYTES": str(400 * 1024 * 1024),
        "CONVERGE_MAX_EVALUATION_BYTES": str(1024 * 1024 * 1024),
    }
    template = HOT + (
        "resources:\n  v:\n    type: OS::Heat::Value\n    properties:\n      value:\n"
        f"        str_replace: {{template: {'a' * 20_000}, params: {{a: {'b' * 30_000}}}}}\n"
    )
    async with (
        start_server(tmp_path / "data", database_url, env=env) as server,
        aiohttp.ClientSession() as http,
    ):
        api = Api(http, server.base)
        response, probe, _ = await probed(
            server, api.call("POST", f"/v1/{PROJECT}/validate", token=TOKEN, json={"template": template})
        )
        assert_refused(response, "needed more memory than a template worker may use (400 MiB", "MEMORY_BYTES")
        probe.assert_healthy()
        assert probe.rss_growth < RSS_BOUND
        await assert_a_normal_stack_creates(api)
