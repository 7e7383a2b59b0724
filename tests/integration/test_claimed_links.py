"""An update's start claims only what its graph reads of each row (`Tx.claim_links`):
the same claim as `claim_resources` (every row locked and its version bumped, so a
decision taken from an earlier read fails its compare-and-swap), the same graph.

Real: PostgreSQL (a stack's rows made by a real create through the engine), the
engine's own `Tx`, and `core.graph.traversal_graph`.
"""

from __future__ import annotations

import pytest

from services.engine.core.graph import traversal_graph
from services.engine.core.model import ResourceId, ResourceRow, RowLinks
from services.engine.core.row_change import ResourceChange
from tests.support.convergence import converge

pytestmark = pytest.mark.integration

TEMPLATE = {
    "heat_template_version": "2016-10-14",
    "resources": {
        "a": {"type": "Test::Thing", "properties": {"value": "a"}},
        "b": {"type": "Test::Thing", "properties": {"value": {"get_attr": ["a", "value"]}}},
        "c": {"type": "Test::Thing", "properties": {"value": "c"}, "depends_on": ["a", "b"]},
    },
}


def links_of(row: ResourceRow | RowLinks) -> tuple[object, ...]:
    return (row.resource_id, row.name, row.replaced_by, row.replaces, row.requires, row.job_requires)


async def test_the_claimed_links_bump_every_row_and_lay_out_the_graph_the_whole_rows_do(
    database_url: str,
) -> None:
    async with converge(database_url, seed=0, duplicate_rate=0.0) as cv:
        stack = await cv.create("s", TEMPLATE)
        assert (await cv.settled(stack))[:2] == ("CREATE", "COMPLETE")
        async with cv.engine.store.transaction() as tx:
            read_before = await tx.resources(stack)
            links = await tx.claim_links(stack)
        async with cv.engine.store.transaction() as tx:
            rows = await tx.claim_resources(stack)
            # The links' claim bumped each row once; this second claim once more.
            assert [r.version for r in rows] == [r.version + 2 for r in read_before]
            stale = read_before[0]
            assert not await tx.update_resource(stale, ResourceChange(status_reason="from a stale read"))
        by_name = {r.name: r for r in rows}
        assert by_name["c"].requires == {by_name["a"].resource_id, by_name["b"].resource_id}
        assert [links_of(x) for x in links] == [links_of(r) for r in rows]
        current = {r.name: ResourceId(r.resource_id) for r in rows}
        requires = {"a": frozenset[str](), "b": frozenset({"a"}), "c": frozenset({"a", "b"})}
        assert traversal_graph(template_requires=requires, current_rows=current, existing=links) == (
            traversal_graph(template_requires=requires, current_rows=current, existing=rows)
        )
