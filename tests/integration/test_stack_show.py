"""A stack show costs what it needs (issue 18's API latency): with the stack's definition
held by this engine and outputs that refer to no resource, it sends no statement beyond
the stack's own lookup; outputs that read resources still read their rows. The secrets
it masks come from the templates the stack's view names, once known.

Real: PostgreSQL, the engine's convergence code and plugins over the in-process bus
(`tests.support.convergence`); the store the API is given is wrapped to count the
transactions it opens (a thin wrapper at our seam, delegating every call).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import pytest

from services.engine.api.deps import ApiDeps
from services.engine.api.masking import SecretsCache
from services.engine.core.model import StackId
from services.engine.store import Store
from tests.support.convergence import Converge, converge

pytestmark = pytest.mark.integration

TEMPLATE = {
    "heat_template_version": "2016-10-14",
    "parameters": {"colour": {"type": "string"}},
    "resources": {"a": {"type": "Test::Thing", "properties": {"value": {"get_param": "colour"}}}},
    "outputs": {"colour": {"value": {"get_param": "colour"}}},
}


class CountingStore:
    """Delegates to the real store, counting the transactions opened."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.transactions = 0

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[Any]:
        self.transactions += 1
        async with self.store.transaction() as tx:
            yield tx

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


async def shown(cv: Converge, api: ApiDeps, stack_id: StackId) -> dict[str, Any]:
    view = await cv.engine.queries.stack(None, str(stack_id))
    assert view is not None
    _, outputs = await api.definition_and_outputs(view)
    return {name: output.value for name, output in outputs.items()}


async def test_a_show_with_the_definition_held_reads_nothing_more_and_outputs_of_resources_read_their_rows(
    database_url: str,
) -> None:
    async with converge(database_url, seed=4) as cv:
        counting = CountingStore(cv.engine.store)
        api = dataclasses.replace(cv.engine.api(), store=counting)  # type: ignore[arg-type]
        plain = await cv.create("plain", TEMPLATE, colour="red")
        with_attr = await cv.create(
            "with-attr",
            {**TEMPLATE, "outputs": {"value": {"value": {"get_attr": ["a", "value"]}}}},
            colour="blue",
        )
        for stack_id in (plain, with_attr):
            assert (await cv.settled(stack_id))[:2] == ("CREATE", "COMPLETE")
            await shown(cv, api, stack_id)  # the definition is held from here on

        counting.transactions = 0
        assert await shown(cv, api, plain) == {"colour": "red"}
        assert counting.transactions == 0, "the held definition answers; no statement"

        assert await shown(cv, api, with_attr) == {"value": "blue"}
        assert counting.transactions == 1, "an output of a resource reads its row"

        await cv.update(plain, TEMPLATE, colour="green")
        assert (await cv.settled(plain))[:2] == ("UPDATE", "COMPLETE")
        assert await shown(cv, api, plain) == {"colour": "green"}, "the new template's definition"


class CountingQueries:
    """Delegates to the real queries, counting the lookups of a stack's templates."""

    def __init__(self, queries: Any) -> None:
        self.queries = queries
        self.lookups = 0

    async def secret_templates(self, stack_ids: Any) -> Any:
        self.lookups += 1
        return await self.queries.secret_templates(stack_ids)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.queries, name)


async def test_the_secrets_of_a_viewed_stack_are_its_templates_hidden_values_without_a_lookup(
    database_url: str,
) -> None:
    hidden = {**TEMPLATE, "parameters": {"colour": {"type": "string", "hidden": True}}}
    async with converge(database_url, seed=6) as cv:
        stack_id = await cv.create("hidden", hidden, colour="secret-red")
        assert (await cv.settled(stack_id))[:2] == ("CREATE", "COMPLETE")
        await cv.update(stack_id, hidden, colour="secret-green")
        assert (await cv.settled(stack_id))[:2] == ("UPDATE", "COMPLETE")
        queries = CountingQueries(cv.engine.queries)
        secrets = SecretsCache(queries)  # type: ignore[arg-type]
        view = await cv.engine.queries.stack(None, str(stack_id))
        assert view is not None
        assert view.previous_template_id is not None

        viewed = await secrets.for_view(view)
        assert viewed == await secrets.for_stack(stack_id), "the same as the stack's own lookup gives"
        assert viewed.mask("was secret-red, now secret-green") == "was ******, now ******"
        queries.lookups = 0
        assert await secrets.for_view(view) == viewed
        assert queries.lookups == 0, "a stack nested in no other: its view names its templates"
