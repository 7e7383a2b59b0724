"""Heat parity (issue 19 items 7 and 8): event filters, sorting, paging and the per-stack
event cap; snapshots (create, list, show, delete, restore, a type's own snapshot,
deletion_policy Snapshot), export and build_info — as OpenStack Heat 27 gives them.

Real: the engine's HTTP app over real HTTP, PostgreSQL, the engine, worker and observer
(in-process bus), python-heatclient unmodified and the real `openstack` CLI. The cloud is
a `World` of Test::Thing resources (a type that takes snapshots of its real state).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from services.engine.core.model import StackId
from tests.support.engine_settings import engine_settings
from tests.support.heat_parity import HeatClients, serving
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

TEMPLATE: dict[str, Any] = {
    "heat_template_version": "2016-10-14",
    "resources": {
        "db": {"type": "Test::Thing", "properties": {"value": "d"}, "metadata": {"tier": "data"}},
        "web": {"type": "Test::Thing", "properties": {"value": "w", "ref": {"get_resource": "db"}}},
        "note": {"type": "OS::Heat::Value", "properties": {"value": "n"}},
    },
}


class Heat(HeatClients):
    async def create(self, name: str, template: dict[str, Any]) -> str:
        created = await self.run(self.hc.stacks.create, stack_name=name, template=template)
        stack_id = str(created["stack"]["id"])
        await self.settled(stack_id)
        return stack_id

    async def settled(self, stack_id: str) -> str:  # the status here
        await self.cv.settled(StackId(uuid.UUID(stack_id)), timeout=60)
        return str((await self.run(self.hc.stacks.get, stack_id)).stack_status)

    async def events(self, stack_id: str, **params: Any) -> list[Any]:
        return list(await self.run(self.hc.events.list, stack_id, **params))


@contextlib.asynccontextmanager
async def open_heat(database_url: str, tmp_path: Path, **options: Any) -> AsyncIterator[Heat]:
    async with serving(Heat, database_url, tmp_path, **options) as heat:
        yield heat


@pytest.fixture
async def heat(database_url: str, tmp_path: Path) -> AsyncIterator[Heat]:
    async with open_heat(database_url, tmp_path) as opened:
        yield opened


# -- events ---------------------------------------------------------------------------------


async def test_event_filters_sorting_and_paging_answer_as_heat(heat: Heat) -> None:
    """Heat's event list: resource_action / resource_status / resource_name / resource_type
    filters (repeatable), sort_keys event_time and resource_type with sort_dir, and
    limit/marker paging; `openstack stack event list --filter` uses them."""
    stack_id = await heat.create("events", TEMPLATE)
    everything = await heat.events(stack_id, sort_dir="asc")
    assert everything[0].resource_status_reason == "Stack CREATE started"

    completes = await heat.events(
        stack_id, filters={"resource_status": "COMPLETE", "resource_action": "CREATE"}
    )
    assert sorted(e.resource_name for e in completes) == ["db", "events", "note", "web"]
    combined = await heat.events(stack_id, filters={"resource_status": "CREATE_COMPLETE"})
    assert [e.id for e in combined] == [e.id for e in completes], "Converge also takes Heat's joined form"
    things = await heat.events(
        stack_id, filters={"resource_type": "Test::Thing", "resource_status": "COMPLETE"}
    )
    assert sorted(e.resource_name for e in things) == ["db", "web"]
    two = await heat.events(
        stack_id, filters={"resource_name": ["db", "note"], "resource_status": "COMPLETE"}
    )
    assert sorted(e.resource_name for e in two) == ["db", "note"]

    by_type = await heat.events(stack_id, sort_keys=["resource_type"], sort_dir="desc")
    types = [e.resource_type for e in by_type]
    assert types == sorted(types, reverse=True)
    newest_first = await heat.events(stack_id, sort_dir="desc")
    assert [e.id for e in newest_first] == [e.id for e in reversed(everything)]

    paged: list[str] = []
    marker = None
    while True:
        page = await heat.events(stack_id, sort_dir="asc", limit=3, marker=marker)
        paged += [e.id for e in page]
        if len(page) < 3:
            break
        marker = page[-1].id
    assert paged == [e.id for e in everything]

    listed = await heat.cli.json(
        "stack",
        "event",
        "list",
        "events",
        "--filter",
        "resource_status=COMPLETE",
        "--filter",
        "resource_name=web",
    )
    assert [(e["resource_name"], e["resource_status"]) for e in listed] == [("web", "CREATE_COMPLETE")]


async def test_a_stack_keeps_its_newest_events_only(database_url: str, tmp_path: Path) -> None:
    """Heat's max_events_per_stack (CONVERGE_MAX_EVENTS_PER_STACK): past the cap, the oldest
    events are purged; the newest, with the stack's last state, stay."""
    settings = engine_settings(max_events_per_stack=5, event_purge_seconds=0.1)
    async with open_heat(database_url, tmp_path, settings=settings) as heat:
        stack_id = await heat.create("capped", TEMPLATE)

        async def capped() -> bool:
            return len(await heat.events(stack_id, sort_dir="asc")) == 5

        await eventually(capped, timeout=30)
        kept = await heat.events(stack_id, sort_dir="asc")
        assert kept[-1].resource_status_reason == "Stack CREATE completed successfully"


# -- snapshots, export, build info ------------------------------------------------------------


async def test_snapshot_create_list_show_restore_and_delete(heat: Heat) -> None:
    """`openstack stack snapshot create/list/show/restore/delete`: the snapshot holds the
    stack's template, environment and resources (with what a type's own snapshot kept: here
    the real value of each Test::Thing, even changed out of band); restore is an update back
    to it (RESTORE_COMPLETE), whose properties the type makes from that data."""
    stack_id = await heat.create("snapped", TEMPLATE)
    world = heat.cv.world
    world.by_name()["web"][0].properties["value"] = "as it really was"

    taken = await heat.cli.json("stack", "snapshot", "create", "snapped", "--name", "first")
    assert (taken["name"], taken["action"]) == ("first", "CREATE")
    taken["id"] = taken.pop("ID")  # heatclient's column name
    assert await heat.settled(stack_id) == "SNAPSHOT_COMPLETE"
    listed = await heat.cli.json("stack", "snapshot", "list", "snapped")
    assert [(s["id"], s["name"], s["status"]) for s in listed] == [(taken["id"], "first", "COMPLETE")]
    shown = (await heat.run(heat.hc.stacks.snapshot_show, stack_id, taken["id"]))["snapshot"]
    data = shown["data"]
    assert data["template"] == TEMPLATE
    assert data["resources"]["db"]["metadata"] == {"tier": "data"}
    assert data["resources"]["web"]["resource_data"]["properties"]["value"] == "as it really was"
    assert data["resources"]["note"]["resource_data"] == {}, "OS::Heat::Value takes no snapshot"

    changed = {**TEMPLATE, "resources": {"db": TEMPLATE["resources"]["db"]}}
    await heat.run(heat.hc.stacks.update, stack_id, template=changed)
    assert await heat.settled(stack_id) == "UPDATE_COMPLETE"
    assert sorted(world.by_name()) == ["db"]

    await heat.cli.ok("stack", "snapshot", "restore", "snapped", taken["id"])
    assert await heat.settled(stack_id) == "RESTORE_COMPLETE"
    assert sorted(world.by_name()) == ["db", "web"]
    assert world.by_name()["web"][0].properties["value"] == "as it really was"

    await heat.cli.ok("stack", "snapshot", "delete", "snapped", taken["id"], "--yes")
    assert await heat.cli.json("stack", "snapshot", "list", "snapped") == []
    missing = await heat.cli.run("stack", "snapshot", "restore", "snapped", taken["id"])
    assert missing.code != 0


async def test_a_snapshot_is_refused_while_an_operation_runs_and_limited_per_stack(
    database_url: str, tmp_path: Path
) -> None:
    from heatclient import exc

    async with open_heat(database_url, tmp_path, settings=engine_settings(max_snapshots_per_stack=1)) as heat:
        stack_id = await heat.create("few", TEMPLATE)
        await heat.run(heat.hc.stacks.snapshot, stack_id, "one")
        assert await heat.settled(stack_id) == "SNAPSHOT_COMPLETE"
        with pytest.raises(exc.HTTPBadRequest) as refused:
            await heat.run(heat.hc.stacks.snapshot, stack_id, "two")
        assert "maximum snapshots per stack, 1" in str(refused.value)
        waiting: dict[str, Any] = {
            "heat_template_version": "2016-10-14",
            "resources": {"h": {"type": "OS::Heat::WaitConditionHandle"}},
        }
        busy = await heat.run(heat.hc.stacks.create, stack_name="busy", template=waiting)
        # An update that waits for a signal that never comes: in progress whatever the timing.
        waits = {
            "resources": {
                **waiting["resources"],
                "w": {
                    "type": "OS::Heat::WaitCondition",
                    "properties": {"handle": {"get_resource": "h"}, "timeout": 600},
                },
            },
            "heat_template_version": "2016-10-14",
        }
        await heat.run(heat.hc.stacks.update, busy["stack"]["id"], template=waits)
        with pytest.raises(exc.HTTPConflict) as conflict:
            await heat.run(heat.hc.stacks.snapshot, busy["stack"]["id"], "mid-update")
        assert "already has an action (UPDATE) in progress" in str(conflict.value)


async def test_deletion_policy_snapshot_is_accepted_where_the_type_takes_snapshots(heat: Heat) -> None:
    """Heat accepts `deletion_policy: Snapshot` where the type can snapshot (and refuses it
    elsewhere); deleting takes the snapshot first, then deletes."""
    from heatclient import exc

    kept = {
        "heat_template_version": "2016-10-14",
        "resources": {
            "vol": {"type": "Test::Thing", "properties": {"value": "data"}, "deletion_policy": "Snapshot"}
        },
    }
    stack_id = await heat.create("kept", kept)
    await heat.run(heat.hc.stacks.delete, stack_id)
    await heat.cv.settled(StackId(uuid.UUID(stack_id)), timeout=60)
    assert heat.cv.world.live == {}
    assert heat.cv.world.snapshots == [("vol", {"value": "data"})]
    reasons = [e["reason"] for e in await heat.cv.events(StackId(uuid.UUID(stack_id)))]
    assert (
        'Snapshot taken before deletion (deletion_policy: Snapshot): {"properties":{"value":"data"}}'
        in reasons
    )

    refused_template = {
        "heat_template_version": "2016-10-14",
        "resources": {"n": {"type": "OS::Heat::None", "deletion_policy": "Snapshot"}},
    }
    with pytest.raises(exc.HTTPBadRequest) as refused:
        await heat.run(heat.hc.stacks.create, stack_name="nope", template=refused_template)
    assert '"Snapshot" deletion policy not supported by OS::Heat::None' in str(refused.value)


async def test_export_answers_the_abandon_document_and_changes_nothing(heat: Heat) -> None:
    stack_id = await heat.create("exported", TEMPLATE)
    exported = await heat.cli.json("stack", "export", "exported")
    assert (exported["id"], exported["name"], exported["template"]) == (stack_id, "exported", TEMPLATE)
    assert {n: r["type"] for n, r in exported["resources"].items()} == {
        "db": "Test::Thing",
        "web": "Test::Thing",
        "note": "OS::Heat::Value",
    }
    assert exported["resources"]["db"]["metadata"] == {"tier": "data"}
    assert (await heat.run(heat.hc.stacks.get, stack_id)).stack_status == "CREATE_COMPLETE"
    assert sorted(heat.cv.world.by_name()) == ["db", "web"]


async def test_build_info_names_what_runs(heat: Heat) -> None:
    import importlib.metadata

    info = await heat.cli.json("orchestration", "build", "info")
    revision = importlib.metadata.version("converge")
    assert info["api"] == {"revision": revision}
    assert info["engine"] == {"revision": revision}
