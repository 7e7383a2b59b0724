"""What an update would do to each resource, without doing it.

Where it sits: `Operations.preview_update` (`operations.changes`) loads the
new goal and refuses it as the update would (immutable parameters, external
ids) before calling `resource_changes` with the stack's current rows. Each
resource of the new template is decided as its check would decide it
(`core.decide.decide_forward`, a nested resource's properties digested with
what `resource_facade` gives, as its check digests them): added, replaced,
updated or unchanged; rows the new template no longer has are deleted. Nothing is
written.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from services.engine.core.decide import Forward, decide_forward
from services.engine.core.model import ResourceRow
from services.engine.core.nesting import facade_of, goal_digest, is_nested, with_digest
from services.engine.goals import Goal
from services.engine.jobs import reference_data
from services.engine.resolving import goal_values
from services.engine.template import ResolutionError, StackDefinition
from services.engine.template_pool import TemplateRunner
from shared.plugins import ResourceType


async def resource_changes(
    rows: Sequence[ResourceRow],
    definition: StackDefinition,
    goal: Goal,
    *,
    types: Mapping[str, type[ResourceType]],
    templates: TemplateRunner,
) -> dict[str, list[ResourceRow | str]]:
    """added / deleted / replaced / updated / unchanged (names for added ones) if the
    stack with `rows` were updated to `definition` (parsed from `goal`). A resource
    whose new properties depend on values not known yet (or too big to resolve here)
    counts as updated."""
    current = {r.name: r for r in rows if r.replaced_by is None}
    data = {n: reference_data(r, types) for n, r in current.items() if r.exists}
    changes: dict[str, list[ResourceRow | str]] = {
        k: [] for k in ("added", "deleted", "replaced", "updated", "unchanged")
    }
    for name, goal_resource in definition.resources.items():
        row = current.get(name)
        if row is None or not row.exists:
            changes["added"].append(name)
            continue
        try:
            properties, metadata = await goal_values(templates, definition, name, data)
        except ResolutionError:
            changes["updated"].append(row)
            continue
        nested = is_nested(goal_resource.type)
        cls = types.get(goal_resource.type)
        if nested:  # as its check digests it (`checks`), what resource_facade gives included
            policy, updates = goal_resource.deletion_policy.value, goal_resource.update_policy
            facade = facade_of(metadata, policy, updates)
            properties = with_digest(properties, goal_digest(goal.environment, goal.files, facade))
        decision = decide_forward(
            row,
            type_name=goal_resource.type,
            schema=cls.properties if cls is not None else None,
            properties=properties,
            external_id=goal_resource.external_id,
            nested=nested,
            replaced_on_update=cls is not None and cls.replaced_on_update,  # by the new template
        )
        kind = {Forward.NOTHING: "unchanged", Forward.REPLACE: "replaced"}.get(decision.kind, "updated")
        changes[kind].append(row)
    changes["deleted"] = [r for n, r in current.items() if n not in definition.resources]
    return changes
