"""Resolving a resource's goal and a stack's outputs at check time, off the loop when needed.

Where it sits: between the callers that resolve compiled values from the
current rows (a node check in `convergence.checks`, an update preview in `operations`,
stack show and output routes in `api.deps`, a nested stack's answer to its
parent in `nested.answer`) and the pure `template.resolve`. Most values are
resolved inline: the evaluation budget bounds them. A value holding a
function whose time the budget does not bound (`yaql`;
`template.resolve.needs_worker`) is resolved in the template pool, so a slow
expression is stopped at the pool's timeout and never holds the event loop;
the pool's refusal becomes a `ResolutionError` at the value's path (the
resource fails, the output carries the error), like any resolution error.

A node check runs inside its message's transaction, and must not hold a
database connection while it waits for the pool: `Resolved.goal_values`
raises `ValuesNeeded` there instead (the transaction rolls back, nothing
claimed or written); the handler resolves the values in the pool with no
transaction open (`Resolved.resolve`) and handles the message again, which
takes them if the check reads the same data (keyed by the template, the
resource and a digest of the data). Should the data change under it
`MAX_ROUNDS` times, the last round waits for the pool in the transaction.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from services.engine.template import (
    OutputValue,
    ResolutionError,
    ResourceDefinition,
    StackDefinition,
    TemplateLimits,
)
from services.engine.template.expr import DataMap
from services.engine.template.resolve import (
    needs_worker,
    resolve_goal,
    resolve_metadata,
    resolve_output_values,
    resolve_outputs,
    resolve_properties,
)
from services.engine.template_pool import TemplateRunner, TemplateWorkRefused
from shared.errors import ConvergeError

#: Rounds of "roll back, resolve in the pool, handle again" one message may take.
MAX_ROUNDS = 3

Values = tuple[dict[str, Any], dict[str, Any]]


async def goal_values(
    templates: TemplateRunner, stack: StackDefinition, name: str, data: DataMap
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The resolved (properties, metadata) of resource `name`; `ResolutionError` if they cannot be."""
    if not needs_worker(stack, name):
        return resolve_properties(stack, name, data), resolve_metadata(stack, name, data)
    try:
        return await templates.run(resolve_goal, stack.resources[name], dict(data), stack.limits)
    except TemplateWorkRefused as exc:
        raise ResolutionError(str(exc), path=f"resources.{name}.properties") from None


async def output_values(
    templates: TemplateRunner, stack: StackDefinition, data: DataMap
) -> dict[str, OutputValue]:
    """Every output of `stack`, resolved from `data` (see `template.resolve_outputs`)."""
    if not needs_worker(stack):
        return resolve_outputs(stack, data)
    try:
        return await templates.run(resolve_output_values, dict(stack.outputs), dict(data), stack.limits)
    except TemplateWorkRefused as exc:
        return {
            name: OutputValue(None, output.description, f"outputs.{name}.value: {exc}")
            for name, output in stack.outputs.items()
        }


class ValuesNeeded(ConvergeError):
    """A check's values must be resolved in the template pool first (see the module)."""

    def __init__(self, key: str, resource: ResourceDefinition, data: DataMap, limits: TemplateLimits) -> None:
        super().__init__(f"values of {resource.name} are resolved in the template pool first")
        self.key = key
        self.resource = resource
        self.data = dict(data)
        self.limits = limits


class Resolved:
    """Values one message's handling had resolved in the template pool, by key."""

    def __init__(self) -> None:
        self._values: dict[str, Values | ResolutionError] = {}
        self.rounds = 0

    async def goal_values(
        self, templates: TemplateRunner, stack: StackDefinition, name: str, data: DataMap, template_id: object
    ) -> Values:
        """As `goal_values`, but raises `ValuesNeeded` rather than wait for the pool."""
        if not needs_worker(stack, name):
            return resolve_properties(stack, name, data), resolve_metadata(stack, name, data)
        key = _key(template_id, name, data)
        found = self._values.get(key)
        if isinstance(found, ResolutionError):
            raise found
        if found is not None:
            return found
        if self.rounds >= MAX_ROUNDS:
            return await goal_values(templates, stack, name, data)
        raise ValuesNeeded(key, stack.resources[name], data, stack.limits)

    async def resolve(self, templates: TemplateRunner, need: ValuesNeeded) -> None:
        """Resolve what `need` asks for in the pool (no transaction open)."""
        self.rounds += 1
        try:
            self._values[need.key] = await templates.run(resolve_goal, need.resource, need.data, need.limits)
        except ResolutionError as exc:
            self._values[need.key] = exc
        except TemplateWorkRefused as exc:
            self._values[need.key] = ResolutionError(
                str(exc), path=f"resources.{need.resource.name}.properties"
            )


def _key(template_id: object, name: str, data: DataMap) -> str:
    """What a resource's values were resolved from: its template, its name, the data."""
    material = [
        str(template_id),
        name,
        {n: [d.reference_id, dict(d.attributes), d.error] for n, d in sorted(data.items())},
    ]
    text = json.dumps(material, sort_keys=True, default=repr)
    return hashlib.sha256(text.encode()).hexdigest()
