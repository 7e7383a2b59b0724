"""Which stack a nested resource may own or adopt, and the limits a tree keeps. Pure."""

from __future__ import annotations

import uuid

import pytest

from services.engine.core.model import Action, ResourceId, StackId, StackRow, Status
from services.engine.core.ownership import Claim, Holder, may_own, stack_id_of
from services.engine.core.quotas import Quotas, tree_refusal

HOLDER = Holder("alpha", StackId(uuid.uuid4()), StackId(uuid.uuid4()), depth=1, resource_id=ResourceId(7))


def stack(
    project: str = "alpha",
    *,
    owner: tuple[StackId, ResourceId] | None = None,
    stack_id: StackId | None = None,
) -> StackRow:
    return StackRow(
        stack_id or StackId(uuid.uuid4()),
        project,
        "s",
        Action.CREATE,
        Status.COMPLETE,
        "",
        None,
        None,
        None,
        owner_stack_id=owner[0] if owner else None,
        owner_resource_id=owner[1] if owner else None,
    )


def test_another_projects_stack_gets_exactly_the_answer_of_a_stack_that_does_not_exist() -> None:
    foreign = may_own(HOLDER, stack("beta"), ref="X")
    missing = may_own(HOLDER, None, ref="X")
    assert foreign == missing
    assert missing.claim is Claim.UNKNOWN
    assert missing.reason == "there is no stack X in this project"
    owned_elsewhere = stack("beta", owner=(HOLDER.stack_id, ResourceId(7)))
    assert may_own(HOLDER, owned_elsewhere, ref="X") == missing, "even one claiming to be its child"


def test_a_resource_owns_only_the_stack_it_is_the_owner_of() -> None:
    mine = may_own(HOLDER, stack(owner=(HOLDER.stack_id, ResourceId(7))), ref="X")
    assert mine.claim is Claim.OWNED
    assert mine.allows(adopting=False)
    for other in ((HOLDER.stack_id, ResourceId(8)), (StackId(uuid.uuid4()), ResourceId(7))):
        verdict = may_own(HOLDER, stack(owner=other), ref="X")
        assert verdict.claim is Claim.TAKEN
        assert not verdict.allows(adopting=True)
        assert verdict.reason == "stack X is the nested stack of another resource"


def test_an_unowned_stack_of_the_project_may_only_be_adopted_explicitly() -> None:
    verdict = may_own(HOLDER, stack(), ref="X")
    assert verdict.claim is Claim.ADOPTABLE
    assert verdict.allows(adopting=True)
    assert not verdict.allows(adopting=False)


@pytest.mark.parametrize("which", ["own stack", "tree top"])
def test_a_stack_never_adopts_itself_or_the_top_of_its_own_tree(which: str) -> None:
    target = HOLDER.stack_id if which == "own stack" else HOLDER.root_stack_id
    verdict = may_own(HOLDER, stack(stack_id=target), ref="X")
    assert verdict.claim is Claim.TAKEN
    assert not verdict.allows(adopting=True)


def test_a_row_not_yet_created_owns_nothing() -> None:
    holder = Holder("alpha", HOLDER.stack_id, HOLDER.root_stack_id)
    assert may_own(holder, stack(owner=(HOLDER.stack_id, ResourceId(7))), ref="X").claim is Claim.TAKEN


@pytest.mark.parametrize("ref", [None, "", "not-a-uuid", "../etc"])
def test_an_id_that_cannot_name_a_stack_names_none(ref: str | None) -> None:
    assert stack_id_of(ref) is None


def test_a_tree_may_not_grow_past_its_limit_but_may_always_shrink() -> None:
    quotas = Quotas(resources_per_tree=10)
    assert tree_refusal(quotas, others=5, before=0, after=5) is None
    refused = tree_refusal(quotas, others=5, before=0, after=6)
    assert refused == (
        "the stack tree would hold 11 resources, more than the maximum of 10 per tree "
        "(CONVERGE_MAX_RESOURCES_PER_TREE)"
    )
    assert tree_refusal(quotas, others=50, before=8, after=8) is None, "a lowered limit still lets it be"
    assert tree_refusal(quotas, others=50, before=8, after=0) is None, "deleting is always allowed"
