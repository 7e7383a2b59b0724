"""An update finishes the cleanup of each row it keeps with the row's forward node
(`core.graph.kept_cleanups`): no backward wave of no-op cleanups after the last
resource is updated, while a row the update replaces is still deleted only after
what used it has moved to its replacement.

Real: PostgreSQL, the engine, worker and observer on the in-process bus (its
delivery disorder and duplicates under several seeds); the pretend cloud records
a thing deleted while a live thing still names it (`World.deleted_in_use`).
"""

from __future__ import annotations

from typing import Any

import pytest

from services.engine.core.model import is_forward, resource_of
from services.engine.messages import CheckResource
from tests.support.convergence import converge, record_published
from tests.support.engine_settings import engine_settings

pytestmark = pytest.mark.integration


def chain(values: dict[str, Any], sizes: dict[str, int]) -> dict[str, Any]:
    """Things in a line, each naming the one before (`ref`); `sizes` change forces replacement."""
    resources: dict[str, Any] = {}
    before: str | None = None
    for name, value in values.items():
        props: dict[str, Any] = {"value": value, "size": sizes.get(name, 1)}
        if before is not None:
            props["ref"] = {"get_resource": before}
        resources[name] = {"type": "Test::Thing", "properties": props}
        before = name
    return {"heat_template_version": "2016-10-14", "resources": resources}


async def test_an_update_checks_no_cleanup_of_a_kept_row_that_waits_on_other_cleanups(
    database_url: str,
) -> None:
    # Follow-on checks off: every node check goes through the queue, where it shows.
    settings = engine_settings(engine_batch_follow_on=0)
    async with converge(database_url, seed=0, duplicate_rate=0.0, settings=settings) as cv:
        stack = await cv.create("s", chain(dict.fromkeys("abcde", "1"), {}))
        assert (await cv.settled(stack))[:2] == ("CREATE", "COMPLETE")
        nodes = record_published(cv, CheckResource.kind, "node")
        await cv.update(stack, chain(dict.fromkeys("abcde", "2"), {}))
        assert (await cv.settled(stack))[:2] == ("UPDATE", "COMPLETE")
        by_id = {r["resource_id"]: r["name"] for r in await cv.rows(stack)}
        cleanups = sorted(by_id[resource_of(n)] for n in nodes if not is_forward(n))
        # e's cleanup waits on e's forward node alone, so it is checked; a..d's were
        # finished with their forward nodes, not checked once the cleanup after each was.
        assert cleanups == ["e"]
        assert sorted(r.properties["value"] for r in cv.world.live.values()) == ["2"] * 5


@pytest.mark.parametrize("seed", range(4))
async def test_a_row_the_update_replaces_is_deleted_only_after_what_used_it_moved(
    database_url: str, seed: int
) -> None:
    async with converge(database_url, seed=seed) as cv:
        stack = await cv.create("s", chain(dict.fromkeys("abcde", "1"), {}))
        assert (await cv.settled(stack))[:2] == ("CREATE", "COMPLETE")
        # b and d are replaced; a, c and e are kept and updated in place (c and e move
        # to the new b and d).
        await cv.update(stack, chain(dict.fromkeys("abcde", "2"), {"b": 2, "d": 2}))
        assert (await cv.settled(stack))[:2] == ("UPDATE", "COMPLETE")
        assert cv.world.deleted_in_use == []
        assert cv.world.deleted == 2
        live = {r.name: r for r in cv.world.live.values()}
        assert sorted(live) == list("abcde"), "the replaced things are gone, one of each is left"
        assert all(r.properties["value"] == "2" for r in live.values())
        assert live["c"].properties["ref"] == live["b"].physical_id
        assert len(await cv.rows(stack)) == 5, "the replaced rows are cleaned up"
