"""Loading, adopting and releasing the stacks nested resources name (the shell of `core.ownership`),
and what a new goal must pass before it is stored.

Where it sits: every place a stack id from outside reaches the engine goes
through here. `owned_child` is how `nested.children` finds a resource's child
stack, every time it acts on it; `take_over` adopts the stack an
`external_id` names (`convergence.checks`, when the resource's forward node runs);
`admit_stack` (`Operations.create`) and `admit_goal` (update, delete) refuse
ids of stacks the resources may not have, and goals past the project's
stack quota or the tree's resource limit (`core.quotas`), with an
`InvalidInput` naming the place, before anything is written; `release` lets
go of a child (a resource adopted through `external_id` leaving its stack,
or an abandoned stack). A stack the resource may not own is never loaded for
use, locked or changed: to the resource it does not exist.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import structlog

from services.engine.core.model import ResourceId, ResourceRow, StackId, StackRow
from services.engine.core.nesting import is_nested
from services.engine.core.ownership import Claim, Holder, Verdict, may_own, stack_id_of, unknown_stack
from services.engine.core.quotas import QuotaExceeded, Quotas, stack_quota_message, tree_refusal
from services.engine.goals import external_refs
from services.engine.store.tenancy import Subtree
from services.engine.store.tx import Tx
from services.engine.template import StackDefinition
from shared.errors import InvalidInput

log = structlog.get_logger(__name__)


async def claim(tx: Tx, holder: Holder, ref: str, *, lock: bool = False) -> tuple[Verdict, StackRow | None]:
    """What `holder` may do with the stack the id `ref` names, and that stack when it may
    own or adopt it (None otherwise, whatever exists). `lock` locks it (to adopt it)."""
    stack_id = stack_id_of(ref)
    if stack_id is None:
        return unknown_stack(ref), None
    target = await tx.stack(stack_id, lock=lock)
    verdict = may_own(holder, target, ref=ref)
    return verdict, target if verdict.claim in (Claim.OWNED, Claim.ADOPTABLE) else None


async def owned_child(tx: Tx, parent: StackRow, row: ResourceRow) -> StackRow | None:
    """The live child stack that `row` (of `parent`) owns; None when it names none, or a
    stack it does not own (which is then left alone)."""
    if row.physical_id is None:
        return None
    verdict, target = await claim(tx, Holder.of(parent, row.resource_id), row.physical_id)
    if verdict.claim is Claim.OWNED:
        return target
    if verdict.claim is not Claim.UNKNOWN:
        log.warning("nested_stack_not_owned", resource=row.name, physical_id=row.physical_id)
    return None


async def adopt(tx: Tx, holder: Holder, ref: str, *, max_depth: int, quotas: Quotas) -> str | None:
    """Make the stack `ref` names the child of `holder`'s resource, as an `external_id`
    asks; the reason it may not (nothing changed), or None once it is the child."""
    assert holder.resource_id is not None
    await tx.lock_tree(holder.root_stack_id)
    verdict, target = await claim(tx, holder, ref, lock=True)
    if target is None or not verdict.allows(adopting=True):
        return verdict.reason
    if verdict.claim is Claim.OWNED:
        return None
    size = await tx.subtree(target.stack_id)
    refusal = await adoption_refusal(tx, holder, size, ref=ref, max_depth=max_depth, quotas=quotas)
    if refusal is not None:
        return refusal
    owner = (holder.stack_id, holder.resource_id)
    await tx.adopt_stack(target.stack_id, owner=owner, depth=holder.depth + 1, root=holder.root_stack_id)
    log.info("nested_stack_adopted", child=str(target.stack_id), owner=str(holder.stack_id))
    return None


async def take_over(
    tx: Tx,
    stack: StackRow,
    row: ResourceRow,
    ref: str | None,
    *,
    external: bool,
    max_depth: int,
    quotas: Quotas,
) -> str | None:
    """Why the nested `row` of `stack` may not take the stack `ref` names as its child (None:
    it now has it). An `external_id` is adopted here; the stack `adopt_stack_data` named was
    adopted when the stack was created, and must still be this row's."""
    holder = Holder.of(stack, row.resource_id)
    if external:
        where = f"resources.{row.name}.external_id"
        refusal = await adopt(tx, holder, ref or "", max_depth=max_depth, quotas=quotas)
    else:
        where = f"adopt_stack_data.resources.{row.name}.resource_id"
        verdict, _ = await claim(tx, holder, ref or "")
        refusal = None if verdict.claim is Claim.OWNED else verdict.reason
    return f"{where}: {refusal}" if refusal is not None else None


async def adoption_refusal(
    tx: Tx, holder: Holder, size: Subtree, *, ref: str, max_depth: int, quotas: Quotas, planned: int = 0
) -> str | None:
    """Why adopting the top-level stack `ref` names, whose tree is `size`, under `holder` would
    break a limit: the nested depth, or the resources of `holder`'s tree (plus `planned`, not
    stored yet)."""
    depth = holder.depth + 1 + size.height
    if depth > max_depth:
        return (
            f"adopting stack {ref} would nest stacks {depth} deep, more than the maximum nested "
            f"depth of {max_depth} (CONVERGE_MAX_NESTED_DEPTH)"
        )
    count = await tx.tree_resources(holder.root_stack_id)
    return tree_refusal(quotas, others=count.total + planned, before=0, after=size.resources)


async def release(tx: Tx, parent: StackRow, row: ResourceRow) -> bool:
    """Let go of the child stack `row` owns, if any: it becomes a top-level stack of its
    project again, untouched otherwise. Whether there was one."""
    child = await owned_child(tx, parent, row)
    if child is None:
        return False
    await tx.release_stack(child.stack_id)
    log.info("nested_stack_released", child=str(child.stack_id), resource=row.name)
    return True


async def check_external_ids(
    tx: Tx, stack: StackRow, refs: Iterable[tuple[str, str]], rows: Mapping[str, ResourceId]
) -> None:
    """Refuse (`InvalidInput` naming `resources.<name>.external_id`) a goal in which a nested
    resource's `external_id` names a stack it may neither own nor adopt, or one another
    resource names too. `refs`: (resource, external_id) of the goal's nested resources that
    name one (`goals.external_refs`); `rows` are the stack's current row ids by name.
    Nothing is locked or changed: the forward check decides again when it adopts."""
    named: dict[StackId, str] = {}
    for name, ref in refs:
        where = f"resources.{name}.external_id"
        verdict, target = await claim(tx, Holder.of(stack, rows.get(name)), ref)
        if target is None:
            raise InvalidInput(verdict.reason, path=where)
        if target.stack_id in named:
            raise InvalidInput(
                f"stack {ref} is the external_id of resource {named[target.stack_id]} too", path=where
            )
        named[target.stack_id] = name


async def stacks_to_adopt(
    tx: Tx,
    stack: StackRow,
    definition: StackDefinition,
    adopt: Mapping[str, str],
    *,
    max_depth: int,
    quotas: Quotas,
) -> dict[str, StackRow]:
    """The stacks `adopt_stack_data` names for the nested resources of the new `stack`, each
    locked and checked (same project, owned by no one, within the limits), by resource name;
    the caller adopts each once its row exists. Anything else is refused (`InvalidInput`
    naming `adopt_stack_data.resources.<name>.resource_id`) before anything is written."""
    holder = Holder.of(stack, None)
    planned = len(definition.resources)
    targets: dict[str, StackRow] = {}
    nested = {n: ref for n, ref in adopt.items() if is_nested(definition.resources[n].type)}
    for name, ref in sorted(nested.items(), key=lambda item: item[1]):  # lock in one order
        where = f"adopt_stack_data.resources.{name}.resource_id"
        verdict, target = await claim(tx, holder, ref, lock=True)
        if target is None:
            raise InvalidInput(verdict.reason, path=where)
        if any(t.stack_id == target.stack_id for t in targets.values()):
            raise InvalidInput(f"stack {ref} is named for another resource too", path=where)
        size = await tx.subtree(target.stack_id)
        refusal = await adoption_refusal(
            tx, holder, size, ref=ref, max_depth=max_depth, quotas=quotas, planned=planned
        )
        if refusal is not None:
            raise QuotaExceeded(refusal, path=where)
        planned += size.resources
        targets[name] = target
    return targets


async def admit_stack(
    tx: Tx,
    draft: StackRow,
    definition: StackDefinition,
    adopt: Mapping[str, str],
    *,
    max_depth: int,
    quotas: Quotas,
) -> dict[str, StackRow]:
    """What a new stack must pass before it is written, in its create transaction: the
    stacks it names (`check_external_ids`, `stacks_to_adopt`, whose result it returns), the
    tree limit, and the project's stack quota, counted under the project's lock held until
    the transaction ends (so concurrent creates are counted one after another)."""
    await check_external_ids(tx, draft, external_refs(definition), {})
    targets = await stacks_to_adopt(tx, draft, definition, adopt, max_depth=max_depth, quotas=quotas)
    refusal = tree_refusal(quotas, others=0, before=0, after=len(definition.resources))
    if refusal is not None:
        raise QuotaExceeded(refusal, path="resources")
    if not await tx.reserve_stack(draft.project_id, quotas.stacks_per_project):
        raise QuotaExceeded(stack_quota_message(quotas))
    return targets


async def admit_goal(
    tx: Tx, stack: StackRow, refs: Sequence[tuple[str, str]], resources: int, *, quotas: Quotas
) -> None:
    """Refuse a new goal for `stack` (its nested resources' external ids `refs`, as
    `check_external_ids` takes them, and its number of `resources`) that names a stack it
    may not adopt, or grows its tree past the limit; nothing is changed. The stack's rows
    are read only if the goal names a stack to adopt (a big stack's update answers sooner)."""
    if refs:
        await check_external_ids(tx, stack, refs, await tx.current_ids(stack.stack_id))
    count = await tx.tree_resources(stack.root, stack_id=stack.stack_id)
    after = resources
    refusal = tree_refusal(quotas, others=count.others, before=count.of_stack, after=after)
    if refusal is not None:
        raise QuotaExceeded(refusal, path="resources")
