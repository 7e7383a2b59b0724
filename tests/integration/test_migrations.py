"""Schema migrations: applied once each, idempotent, safe when engines start together.

Real: PostgreSQL, and the `converge-engine migrate` executable.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import asyncpg
import pytest

from services.engine.store.migrate import MigrationError, load_migrations, migrate
from tests.support.processes import run_script

pytestmark = pytest.mark.integration


async def test_migrate_applies_every_migration_then_nothing(db: asyncpg.Connection) -> None:
    expected = [m.version for m in load_migrations()]
    assert await migrate(db) == expected
    assert await migrate(db) == []
    tables = {
        r["tablename"] for r in await db.fetch("SELECT tablename FROM pg_tables WHERE schemaname='public'")
    }
    assert {
        "stacks",
        "resources",
        "traversals",
        "traversal_nodes",
        "events",
        "outbox",
        "inbox",
        "engines",
    } <= tables


async def test_two_concurrent_migrate_runs_apply_each_migration_exactly_once(
    database_url: str, db: asyncpg.Connection
) -> None:
    env = {"CONVERGE_DATABASE_URL": database_url}
    results = await asyncio.gather(
        run_script(["converge-engine", "migrate"], env), run_script(["converge-engine", "migrate"], env)
    )
    for code, output in results:
        assert code == 0, output
    rows = await db.fetch("SELECT version FROM schema_migrations ORDER BY version")
    assert [r["version"] for r in rows] == [m.version for m in load_migrations()]


async def test_a_migration_edited_after_it_was_applied_is_refused(
    db: asyncpg.Connection, tmp_path: Path
) -> None:
    (tmp_path / "0001_first.sql").write_text("CREATE TABLE first_table (x int);")
    await migrate(db, load_migrations(tmp_path))
    (tmp_path / "0001_first.sql").write_text("CREATE TABLE first_table (x bigint);")
    with pytest.raises(MigrationError, match="was changed after it was applied"):
        await migrate(db, load_migrations(tmp_path))


def test_migration_files_must_be_numbered_without_gaps(tmp_path: Path) -> None:
    (tmp_path / "0001_a.sql").write_text("SELECT 1;")
    (tmp_path / "0003_c.sql").write_text("SELECT 1;")
    with pytest.raises(MigrationError, match="without gaps"):
        load_migrations(tmp_path)
