"""Per-project and per-tree limits, and the refusals that name them. Pure.

Where it sits: `service.quotas` builds `Quotas` from the settings once; the
engine's operations (a stack created or updated through the API) and
`nested.children` (a child stack created or given a new goal) count in the
database under a lock (`store.tenancy`) and ask these functions whether the
result fits. Nested stacks count toward the project's stack quota like any
other; a tree (a top-level stack and every stack nested under it) holds at
most `resources_per_tree` resources in all.
"""

from __future__ import annotations

from dataclasses import dataclass

from shared.errors import InvalidInput

STACKS_SETTING = "CONVERGE_MAX_STACKS_PER_PROJECT"
TREE_SETTING = "CONVERGE_MAX_RESOURCES_PER_TREE"


@dataclass(frozen=True)
class Quotas:
    """The same for every project; every engine must use the same values."""

    stacks_per_project: int = 1000
    resources_per_tree: int = 100_000


DEFAULT_QUOTAS = Quotas()


class QuotaExceeded(InvalidInput):
    """Storing this would take a project or a stack tree past its limit; nothing changed."""


def stack_quota_message(quotas: Quotas) -> str:
    return f"quota exceeded: at most {quotas.stacks_per_project} stacks per project ({STACKS_SETTING})"


def tree_refusal(quotas: Quotas, *, others: int, before: int, after: int) -> str | None:
    """Why a stack of a tree may not go from `before` to `after` resources while the rest of
    its tree holds `others` (None: it may). Shrinking is always allowed, so a tree already
    past a lowered limit can still be updated down and deleted."""
    total = others + after
    if total <= quotas.resources_per_tree or after <= before:
        return None
    return (
        f"the stack tree would hold {total} resources, more than the maximum of "
        f"{quotas.resources_per_tree} per tree ({TREE_SETTING})"
    )
