"""The tenancy migration (0008 here) gives stacks that already exist their tree's top and their goal's size.

Real: PostgreSQL; the migrations before it applied, rows written as that schema
had them, then the rest applied.
"""

from __future__ import annotations

import uuid

import asyncpg
import pytest

from services.engine.store.migrate import load_migrations, migrate

pytestmark = pytest.mark.integration


async def test_existing_trees_get_their_root_and_size(db: asyncpg.Connection) -> None:
    migrations = load_migrations()
    tenancy = next(i for i, m in enumerate(migrations) if m.name == "tenancy")  # renumbered at merges
    await migrate(db, migrations[:tenancy])
    top, child, grandchild, other = (uuid.uuid4() for _ in range(4))
    for stack_id, owner, depth in ((top, None, 0), (child, top, 1), (grandchild, child, 2), (other, None, 0)):
        await db.execute(
            """INSERT INTO stacks (stack_id, project_id, name, action, status, owner_stack_id, nested_depth)
               VALUES ($1, 'p', $2, 'CREATE', 'COMPLETE', $3, $4)""",
            stack_id,
            str(stack_id),
            owner,
            depth,
        )
    for stack_id, names in ((top, ["a", "b"]), (child, ["c"]), (grandchild, ["d", "e", "f"])):
        for name in names:
            await db.execute(
                "INSERT INTO resources (stack_id, name, type) VALUES ($1, $2, 'T')", stack_id, name
            )
    await migrate(db)
    rows = {
        r["stack_id"]: (r["root_stack_id"], r["goal_resources"])
        for r in await db.fetch("SELECT stack_id, root_stack_id, goal_resources FROM stacks")
    }
    assert rows == {top: (top, 2), child: (top, 1), grandchild: (top, 3), other: (other, 0)}
    assert await db.fetchval("SELECT bool_or(external) FROM resources") is False
