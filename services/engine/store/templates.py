"""Statements of stored templates (mixed into `Tx`): a stack's goals, by id.

Where it sits: an operation stores the template, environment, files and
parameters it was given as a new goal (`insert_template`) before it begins a
traversal to it; checks read a goal back by id (`template`, through
`services.engine.definitions`). A template row is never changed, so its id
names one goal for good.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from services.engine.core.model import StackId, TemplateId
from services.engine.store.driver import Conn


@dataclass(frozen=True)
class TemplateRecord:
    template_id: TemplateId
    template: Mapping[str, Any]
    environment: Mapping[str, Any]
    files: Mapping[str, str]
    parameters: Mapping[str, Any]
    source: str | None = None  # the template's text as the user sent it, if they sent text


class TemplateStatements:
    _c: Conn  # the transaction's connection (`Tx`)

    async def insert_template(self, stack_id: StackId, record: TemplateRecord) -> None:
        await self.insert_encoded_template(
            stack_id,
            record.template_id,
            template=_json(record.template),
            environment=_json(record.environment),
            files=_json(record.files),
            parameters=_json(record.parameters),
            source=record.source,
        )

    async def insert_encoded_template(
        self,
        stack_id: StackId,
        template_id: TemplateId,
        *,
        template: str,
        environment: str,
        files: str,
        parameters: str,
        source: str | None,
    ) -> None:
        """`insert_template` with the documents already encoded as JSON text (a create's or
        an update's, in the template pool: `goals.EncodedGoal`), stored as given."""
        await self._c.execute(
            """INSERT INTO templates (template_id, stack_id, template, environment, files, parameters, source)
               VALUES ($1, $2, $3::text::jsonb, $4::text::jsonb, $5::text::jsonb, $6::text::jsonb, $7)""",
            template_id,
            stack_id,
            template,
            environment,
            files,
            parameters,
            source,
        )

    async def template(self, template_id: TemplateId) -> TemplateRecord | None:
        r = await self._c.fetchrow(
            """SELECT template_id, template, environment, files, parameters, source
               FROM templates WHERE template_id = $1""",
            template_id,
        )
        if r is None:
            return None
        return TemplateRecord(
            r["template_id"], r["template"], r["environment"], r["files"], r["parameters"], r["source"]
        )


def _json(document: Mapping[str, Any]) -> str:
    return json.dumps(dict(document))
