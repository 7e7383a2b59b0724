"""Resolving a resource's goal and a stack's outputs at check time, off the loop when needed.

Where it sits: between the callers that resolve compiled values from the
current rows (a node check in `checks`, an update preview in `operations`,
stack show and output routes in `api.deps`, a nested stack's answer to its
parent in `nested.answer`) and the pure `template.resolve`. Most values are
resolved inline: the evaluation budget bounds them. A value holding a
function whose time the budget does not bound (`yaql`;
`template.resolve.needs_worker`) is resolved in the template pool, so a slow
expression is stopped at the pool's timeout and never holds the event loop;
the pool's refusal becomes a `ResolutionError` at the value's path (the
resource fails, the output carries the error), like any resolution error.
"""

from __future__ import annotations

from typing import Any

from services.engine.template import OutputValue, ResolutionError, StackDefinition
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
