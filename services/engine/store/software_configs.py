"""Statements of software configurations (mixed into `Tx`).

Where it sits: the `/software_configs` API (`services.engine.api.software_configs`)
and the engine's run of the config resource types (`services.engine.configs`)
write and read configs through these, in the engine's own transactions. Every
statement names the project, so a config of another project is not found. The
records they return are in `software_records.py`.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from services.engine.store.software_records import CONFIG_COLUMNS, ConfigRecord, config_record

if TYPE_CHECKING:
    from services.engine.store.driver import Conn


class SoftwareConfigStatements:
    _c: Conn

    async def insert_software_config(
        self, config_id: uuid.UUID, project_id: str, name: str, group: str, config: Mapping[str, Any]
    ) -> ConfigRecord:
        """Write a config; writing the same id again (a redelivered job) keeps the first."""
        await self._c.execute(
            """INSERT INTO software_configs (config_id, project_id, name, "group", config)
               VALUES ($1, $2, $3, $4, $5) ON CONFLICT (config_id) DO NOTHING""",
            config_id,
            project_id,
            name,
            group,
            dict(config),
        )
        found = await self.software_config(project_id, config_id)
        assert found is not None
        return found

    async def software_config(self, project_id: str, config_id: uuid.UUID) -> ConfigRecord | None:
        r = await self._c.fetchrow(
            f"SELECT {CONFIG_COLUMNS} FROM software_configs WHERE project_id = $1 AND config_id = $2",
            project_id,
            config_id,
        )
        return config_record(r) if r is not None else None

    async def software_configs(
        self, project_id: str, *, limit: int, after: ConfigRecord | None
    ) -> list[ConfigRecord]:
        """A page of the project's configs, oldest first, after `after` (the marker)."""
        if after is None:
            rows = await self._c.fetch(
                f"""SELECT {CONFIG_COLUMNS} FROM software_configs WHERE project_id = $1
                    ORDER BY created_at, config_id LIMIT $2""",
                project_id,
                limit,
            )
        else:
            rows = await self._c.fetch(
                f"""SELECT {CONFIG_COLUMNS} FROM software_configs WHERE project_id = $1
                    AND (created_at, config_id) > ($2, $3)
                    ORDER BY created_at, config_id LIMIT $4""",
                project_id,
                after.created_at,
                after.config_id,
                limit,
            )
        return [config_record(r) for r in rows]

    async def delete_software_config(self, project_id: str, config_id: uuid.UUID) -> bool:
        r = await self._c.fetchval(
            "DELETE FROM software_configs WHERE project_id = $1 AND config_id = $2 RETURNING 1",
            project_id,
            config_id,
        )
        return r is not None
