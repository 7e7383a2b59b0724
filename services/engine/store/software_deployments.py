"""Statements of software deployments (mixed into `Tx`).

Where it sits: the `/software_deployments` API
(`services.engine.api.software_deployments`), the engine's run of the deployment
resource types and the agent's signals (`services.engine.deployments`) write
and read deployments through these, in the engine's own transactions. Every
statement names the project, so a deployment of another project is not found.
The records they return, and a deployment's change, are in `software_records.py`.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from services.engine.store.software_records import (
    DEPLOYMENT_COLUMNS,
    DeploymentChange,
    DeploymentRecord,
    deployment_record,
)

if TYPE_CHECKING:
    from services.engine.store.driver import Conn


class SoftwareDeploymentStatements:
    _c: Conn

    async def insert_software_deployment(
        self,
        deployment_id: uuid.UUID,
        project_id: str,
        *,
        server_id: str,
        config_id: uuid.UUID,
        input_values: Mapping[str, Any],
        action: str,
        status: str,
        status_reason: str = "",
        stack_id: uuid.UUID | None = None,
        resource_name: str | None = None,
    ) -> DeploymentRecord:
        """Write a deployment; writing the same id again (a redelivered job) keeps the first."""
        await self._c.execute(
            """INSERT INTO software_deployments (deployment_id, project_id, server_id, config_id,
                   input_values, action, status, status_reason, stack_id, resource_name)
               VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT (deployment_id) DO NOTHING""",
            deployment_id,
            project_id,
            server_id,
            config_id,
            dict(input_values),
            action,
            status,
            status_reason,
            stack_id,
            resource_name,
        )
        found = await self.software_deployment(project_id, deployment_id)
        assert found is not None
        return found

    async def software_deployment(
        self, project_id: str, deployment_id: uuid.UUID, *, lock: bool = False
    ) -> DeploymentRecord | None:
        r = await self._c.fetchrow(
            f"""SELECT {DEPLOYMENT_COLUMNS} FROM software_deployments
                WHERE project_id = $1 AND deployment_id = $2 {"FOR UPDATE" if lock else ""}""",
            project_id,
            deployment_id,
        )
        return deployment_record(r) if r is not None else None

    async def software_deployments(
        self, project_id: str, *, server_id: str | None, limit: int
    ) -> list[DeploymentRecord]:
        """The project's deployments (to one server, if given), oldest first."""
        rows = await self._c.fetch(
            f"""SELECT {DEPLOYMENT_COLUMNS} FROM software_deployments
                WHERE project_id = $1 AND ($2::text IS NULL OR server_id = $2)
                ORDER BY created_at, deployment_id LIMIT $3""",
            project_id,
            server_id,
            limit,
        )
        return [deployment_record(r) for r in rows]

    async def update_software_deployment(
        self, project_id: str, deployment_id: uuid.UUID, change: DeploymentChange
    ) -> DeploymentRecord | None:
        """Write the columns `change` sets; None when there is no such deployment."""
        written = change.written()
        sets = "".join(f"{n} = ${i}, " for i, n in enumerate(written, 3))
        r = await self._c.fetchrow(
            f"""UPDATE software_deployments SET {sets}updated_at = now()
                WHERE project_id = $1 AND deployment_id = $2 RETURNING {DEPLOYMENT_COLUMNS}""",
            project_id,
            deployment_id,
            *written.values(),
        )
        return deployment_record(r) if r is not None else None

    async def delete_software_deployment(self, project_id: str, deployment_id: uuid.UUID) -> bool:
        r = await self._c.fetchval(
            "DELETE FROM software_deployments WHERE project_id = $1 AND deployment_id = $2 RETURNING 1",
            project_id,
            deployment_id,
        )
        return r is not None

    async def config_in_use(self, project_id: str, config_id: uuid.UUID) -> bool:
        """Whether a deployment runs this (derived) config."""
        r = await self._c.fetchval(
            "SELECT 1 FROM software_deployments WHERE project_id = $1 AND config_id = $2 LIMIT 1",
            project_id,
            config_id,
        )
        return r is not None

    async def server_agent_tokens(self, project_id: str, server_id: str) -> list[str]:
        """The agent tokens of the project's current resources with this physical id (a
        Sandbox::Server publishes its agent's token as attribute `agent_token`)."""
        rows = await self._c.fetch(
            """SELECT r.attributes->>'agent_token' AS token FROM resources r
               JOIN stacks s ON s.stack_id = r.stack_id
               WHERE s.project_id = $1 AND r.physical_id = $2 AND r.replaced_by IS NULL
                 AND r.attributes ? 'agent_token'""",
            project_id,
            server_id,
        )
        return [r["token"] for r in rows if isinstance(r["token"], str)]
