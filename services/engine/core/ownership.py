"""May this resource own that stack? The one answer for every id that enters from outside. Pure.

Where it sits: a nested resource (`core.nesting.is_nested`) names its child
stack by id — the physical id on its row, an `external_id` in a template, a
`resource_id` in `adopt_stack_data`. `nested.claims` loads the stack the id
names (in any project, or none) and asks `may_own`; the engine acts on the
stack only when the answer allows it.

The rules: a stack may be the child of a resource only if it is in the
resource's project and is owned by that very resource; or, when the caller
adopts it explicitly, if it is owned by no one (a top-level stack) and is not
the top of the resource's own tree (that would make a cycle). A stack of
another project gets exactly the answer a stack that does not exist gets:
the same claim, the same message (which repeats only the id the caller gave).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from enum import StrEnum

from services.engine.core.model import ResourceId, StackId, StackRow


@dataclass(frozen=True)
class Holder:
    """The resource that would own a stack. `resource_id` is None while its row does not
    exist yet (adopt data on create); `depth` is the nested depth of its stack."""

    project_id: str
    stack_id: StackId
    root_stack_id: StackId
    depth: int = 0
    resource_id: ResourceId | None = None

    @classmethod
    def of(cls, stack: StackRow, resource_id: ResourceId | None) -> Holder:
        return cls(stack.project_id, stack.stack_id, stack.root, stack.nested_depth, resource_id)


class Claim(StrEnum):
    OWNED = "owned"  # the stack is this resource's child already
    ADOPTABLE = "adoptable"  # owned by no one, in the project: it may be adopted explicitly
    UNKNOWN = "unknown"  # no such stack for this project (another project's stack included)
    TAKEN = "taken"  # in the project, but another resource's child (or this tree's top)


@dataclass(frozen=True)
class Verdict:
    claim: Claim
    reason: str = ""  # why the stack may not be this resource's child (empty when it may)

    def allows(self, *, adopting: bool) -> bool:
        return self.claim is Claim.OWNED or (adopting and self.claim is Claim.ADOPTABLE)


def stack_id_of(ref: str | None) -> StackId | None:
    """The stack id an id from outside names, or None when it cannot name a stack."""
    if ref is None:
        return None
    try:
        return StackId(uuid.UUID(ref))
    except ValueError:
        return None


def unknown_stack(ref: str) -> Verdict:
    return Verdict(Claim.UNKNOWN, f"there is no stack {ref} in this project")


def may_own(holder: Holder, target: StackRow | None, *, ref: str) -> Verdict:
    """What `holder` may do with `target`, the live stack the id `ref` names (None: none)."""
    if target is None or target.project_id != holder.project_id:
        return unknown_stack(ref)
    if (
        holder.resource_id is not None
        and target.owner_stack_id == holder.stack_id
        and target.owner_resource_id == holder.resource_id
    ):
        return Verdict(Claim.OWNED)
    if target.owner_stack_id is not None:
        return Verdict(Claim.TAKEN, f"stack {ref} is the nested stack of another resource")
    if target.stack_id in (holder.stack_id, holder.root_stack_id):
        return Verdict(Claim.TAKEN, f"stack {ref} contains this resource; it cannot nest in itself")
    return Verdict(Claim.ADOPTABLE, f"stack {ref} is not a nested stack of this resource")
