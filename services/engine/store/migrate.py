"""Schema migrations: ordered SQL files applied once each, recorded in a table.

Files are `migrations/NNNN_description.sql`, applied in version order. Each
run takes a transaction-scoped advisory lock first, so engines starting at
the same moment apply every migration exactly once; a migration that was
applied and later edited is refused (its checksum no longer matches).
Run by `converge-engine migrate` and at engine start.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

import asyncpg
from asyncpg.pool import PoolConnectionProxy

from shared.errors import PermanentError

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")
# Any constant unique to Converge; serialises concurrent migrate runs.
_LOCK_KEY = 0x436F6E76  # "Conv"


class MigrationError(PermanentError):
    """The migrations on disk and in the database do not agree."""


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()


def load_migrations(directory: Path = MIGRATIONS_DIR) -> list[Migration]:
    """Read and order the migration files; versions must be 1..N without gaps."""
    found: list[Migration] = []
    for path in sorted(directory.glob("*.sql")):
        match = _NAME.match(path.name)
        if match is None:
            raise MigrationError(f"bad migration file name {path.name!r} (want NNNN_name.sql)")
        found.append(Migration(int(match[1]), match[2], path.read_text()))
    versions = [m.version for m in found]
    if versions != list(range(1, len(found) + 1)):
        raise MigrationError(f"migration versions must be 1..N without gaps, found {versions}")
    return found


async def migrate(
    conn: asyncpg.Connection | PoolConnectionProxy, migrations: list[Migration] | None = None
) -> list[int]:
    """Apply pending migrations; return the versions applied by this call."""
    wanted = load_migrations() if migrations is None else migrations
    applied_now: list[int] = []
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", _LOCK_KEY)
        await conn.execute(
            """CREATE TABLE IF NOT EXISTS schema_migrations (
                   version integer PRIMARY KEY,
                   name text NOT NULL,
                   checksum text NOT NULL,
                   applied_at timestamptz NOT NULL DEFAULT now())"""
        )
        done = {
            r["version"]: r["checksum"]
            for r in await conn.fetch("SELECT version, checksum FROM schema_migrations")
        }
        for migration in wanted:
            if migration.version in done:
                if done[migration.version] != migration.checksum:
                    raise MigrationError(
                        f"migration {migration.version:04d}_{migration.name} was changed after "
                        "it was applied; add a new migration instead"
                    )
                continue
            await conn.execute(migration.sql)
            await conn.execute(
                "INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, $2, $3)",
                migration.version,
                migration.name,
                migration.checksum,
            )
            applied_now.append(migration.version)
        unknown = sorted(set(done) - {m.version for m in wanted})
        if unknown:
            raise MigrationError(
                f"database has migrations {unknown} this engine does not know; upgrade the engine"
            )
    return applied_now
