"""What checking a node decides: create, update in place, replace, adopt, nothing; keep or delete;
what a failed row keeps, and how a failed stack check reads. Pure."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from services.engine.core.decide import (
    Cleanup,
    Forward,
    check_failure_reason,
    decide_cleanup,
    decide_forward,
    failure_reason,
    properties_after_failure,
)
from services.engine.core.drift import missing_marks
from services.engine.core.model import Action, ResourceId, ResourceRow, StackId, Status, TemplateId
from shared.plugins import Properties, UpdateRule, prop
from shared.plugins.builtin.placeholders import AnyProperties, NoneResource


class Props(Properties):
    name: str | None = prop(None, description="in place")
    image: str | None = prop(None, description="replace", update=UpdateRule.REPLACE)


def row(
    physical_id: str | None = "p1",
    *,
    status: Status = Status.COMPLETE,
    action: Action = Action.CREATE,
    properties: dict[str, Any] | None = None,
    type_name: str = "T",
    **extra: Any,
) -> ResourceRow:
    return ResourceRow(
        ResourceId(1),
        StackId(uuid.uuid4()),
        "r",
        type_name,
        physical_id,
        action,
        status,
        properties=properties if properties is not None else {"name": "a", "image": "x"},
        **extra,
    )


def decide(
    r: ResourceRow, props: dict[str, Any], *, type_name: str = "T", external: str | None = None
) -> Forward:
    return decide_forward(r, type_name=type_name, schema=Props, properties=props, external_id=external).kind


@pytest.mark.parametrize(
    ("current", "goal", "expected"),
    [
        (row(None, action=Action.INIT), {"name": "a"}, Forward.CREATE),
        (row(), {"name": "a", "image": "x"}, Forward.NOTHING),
        (row(), {"name": "b", "image": "x"}, Forward.UPDATE),
        (row(), {"name": "a", "image": "y"}, Forward.REPLACE),
        (row(status=Status.FAILED, action=Action.UPDATE), {"name": "a", "image": "x"}, Forward.UPDATE),
        (row(status=Status.FAILED, action=Action.CREATE), {"name": "a", "image": "x"}, Forward.REPLACE),
    ],
)
def test_forward_decision(current: ResourceRow, goal: dict[str, Any], expected: Forward) -> None:
    assert decide(current, goal) is expected


def test_a_changed_type_forces_replacement() -> None:
    assert decide(row(), {"name": "a", "image": "x"}, type_name="Other") is Forward.REPLACE


def test_a_none_resource_is_updated_in_place_whatever_property_changes() -> None:
    """OS::Heat::None accepts any property and is never replaced, as in Heat; a property a
    type's schema does not declare, and would refuse, still forces replacement."""
    none = row(type_name=NoneResource.type_name, properties={"value": "g1-0", "size": 1})
    changed = {"value": "g2-0", "flavor": "m1.small"}
    kind = decide_forward(
        none, type_name=NoneResource.type_name, schema=AnyProperties, properties=changed, external_id=None
    ).kind
    assert kind is Forward.UPDATE
    assert decide(row(properties={"name": "a", "gone": 1}), {"name": "a"}) is Forward.REPLACE


def test_an_external_id_is_adopted_instead_of_created() -> None:
    assert decide(row(None), {}, external="ext-1") is Forward.ADOPT


def test_default_values_do_not_count_as_changes() -> None:
    assert decide(row(properties={"name": "a"}), {"name": "a", "image": None}) is Forward.NOTHING


def test_cleanup_keeps_rows_the_current_goal_adopted_and_deletes_the_rest() -> None:
    current = TemplateId(uuid.uuid4())
    assert decide_cleanup(row(template_id=current), current_template_id=current) is Cleanup.KEEP
    assert (
        decide_cleanup(row(template_id=TemplateId(uuid.uuid4())), current_template_id=current)
        is Cleanup.DELETE
    )
    replaced = row(template_id=current, replaced_by=ResourceId(9))
    assert decide_cleanup(replaced, current_template_id=current) is Cleanup.DELETE
    assert decide_cleanup(row(None), current_template_id=current) is Cleanup.FORGET
    assert decide_cleanup(row(deletion_policy="Retain"), current_template_id=current) is Cleanup.FORGET


def test_cleanup_lets_go_of_a_row_adopted_through_external_id_and_never_deletes_it() -> None:
    current = TemplateId(uuid.uuid4())
    old = TemplateId(uuid.uuid4())
    assert (
        decide_cleanup(row(template_id=current, external=True), current_template_id=current) is Cleanup.KEEP
    )
    for external in (
        row(template_id=old, external=True),  # removed from the template, or its stack deleted
        row(template_id=current, replaced_by=ResourceId(9), external=True),  # replaced
        row(template_id=old, action=Action.UPDATE, external=True),  # updated since it was adopted
    ):
        assert decide_cleanup(external, current_template_id=current) is Cleanup.LET_GO


def test_failure_reasons_read_like_heats() -> None:
    assert failure_reason(Action.CREATE, "boom") == "Resource CREATE failed: boom"
    assert failure_reason("update", "Resource UPDATE failed: x") == "Resource UPDATE failed: x"


def test_a_failed_create_keeps_the_properties_it_was_given_so_it_can_be_deleted() -> None:
    attempted = {"url": "http://api/things", "body": {"a": 1}}
    assert properties_after_failure(Action.CREATE, None, attempted) == attempted
    # A re-create of a resource found gone was given its (new) properties too.
    assert properties_after_failure(Action.CREATE, {"url": "old"}, attempted) == attempted


def test_a_failed_update_keeps_what_was_applied_so_a_retry_applies_the_change_again() -> None:
    applied, attempted = {"name": "a"}, {"name": "b"}
    for action in (Action.UPDATE, Action.DELETE, Action.CHECK, Action.SUSPEND):
        assert properties_after_failure(action, applied, attempted) == applied
    assert properties_after_failure(Action.UPDATE, None, attempted) == attempted  # never applied
    assert properties_after_failure(Action.DELETE, applied, None) == applied


def test_a_row_recorded_missing_is_created_again_by_the_next_forward_check() -> None:
    marks = missing_marks("Resource CHECK failed: the resource no longer exists")
    assert marks.physical_id is None
    gone = row(**{k: v for k, v in marks.written().items() if k != "physical_id"}, physical_id=None)
    assert decide(gone, {"name": "a", "image": "x"}) is Forward.CREATE
    later = TemplateId(uuid.uuid4())
    assert decide_cleanup(gone, current_template_id=later) is Cleanup.FORGET  # nothing left to delete


def test_a_failed_stack_check_names_every_resource_that_failed() -> None:
    gone = "Resource CHECK failed: the resource no longer exists"
    assert (
        check_failure_reason([("app", gone)]) == "Resource CHECK failed: app: the resource no longer exists"
    )
    many = [(f"r{i}", gone) for i in range(7)]
    reason = check_failure_reason(
        [("net", "Resource CHECK failed: the resource is in an error state"), *many]
    )
    assert reason.startswith(
        "Resource CHECK failed: net: the resource is in an error state; r0: the resource"
    )
    assert reason.endswith("; and 3 more")


def test_a_type_replaced_on_update_is_replaced_once_by_each_new_template() -> None:
    old, new = TemplateId(uuid.uuid4()), TemplateId(uuid.uuid4())
    props = {"name": "a", "image": "x"}

    def renew(r: ResourceRow, goal: TemplateId | None) -> Forward:
        return decide_forward(
            r,
            type_name="T",
            schema=Props,
            properties=props,
            external_id=None,
            replaced_on_update=True,
            goal_template_id=goal,
        ).kind

    assert renew(row(template_id=old), new) is Forward.REPLACE, "unchanged, yet a new operation"
    assert renew(row(template_id=new), new) is Forward.NOTHING, "its own operation's check, again"
    assert renew(row(template_id=old), None) is Forward.REPLACE, "a preview of an update"
    assert renew(row(None, template_id=new), new) is Forward.CREATE
    assert decide(row(template_id=old), props) is Forward.NOTHING, "other types are left alone"
