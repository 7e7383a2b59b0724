"""Nested stacks, pure: child goals of each nested type, group membership and attributes,
and when a nested resource's child is updated or left alone."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import structlog

from services.engine.core.child_attributes import GroupAttributes, Member, child_attributes
from services.engine.core.child_goals import child_goal
from services.engine.core.decide import Forward, decide_forward
from services.engine.core.groups import group_plan, group_template
from services.engine.core.model import Action, ResourceId, ResourceRow, StackId, Status
from services.engine.core.nesting import (
    GOAL_KEY,
    NestedInvalid,
    child_name,
    goal_digest,
    is_nested,
    with_digest,
)
from services.engine.template import Budget, OutputValue, ResourceData
from services.engine.template.expr import GetAttr
from services.worker.runner import run_job
from shared.plugins.builtin.nested import GroupProperties, StackProperties
from shared.plugins.registry import load_types
from shared.plugins.runtime import PluginRuntime
from shared.protocol import JobAction, JobOutcome, ResourceJob

ENV = {"resource_registry": {"My::T": "t.yaml"}, "parameters": {"top_only": 1}}


def group(count: int, removal: list[str] | None = None, mode: str = "append") -> GroupProperties:
    return GroupProperties.model_validate(
        {
            "count": count,
            "resource_def": {"type": "My::T", "properties": {"name": "m-%index%", "tags": ["%index%", 7]}},
            "removal_policies": [{"resource_list": removal}] if removal else [],
            "removal_policies_mode": mode,
        }
    )


def test_the_nested_types_are_the_two_declared_ones_and_template_files() -> None:
    assert is_nested("OS::Heat::Stack")
    assert is_nested("OS::Heat::ResourceGroup")
    assert is_nested("member.yaml")
    assert is_nested("x.template")
    assert not is_nested("OS::Heat::None")


def test_scaling_keeps_the_first_names_so_only_the_difference_changes() -> None:
    assert group_plan(group(3), members={}, removed=()).members == ("0", "1", "2")
    assert group_plan(group(5), members={}, removed=()).members == ("0", "1", "2", "3", "4")
    assert group_plan(group(1), members={}, removed=()).members == ("0",)
    assert group_plan(group(0), members={}, removed=()).members == ()


def test_removal_policies_remove_named_or_referenced_members_whose_names_are_never_reused() -> None:
    plan = group_plan(group(3, ["1", "ref-of-3"]), members={"ref-of-3": "3"}, removed=())
    assert plan.members == ("0", "2", "4")
    assert plan.removed == ("1", "3")
    later = group_plan(group(4), members={}, removed=plan.removed)
    assert later.members == ("0", "2", "4", "5"), "removed names stay removed (append mode)"
    assert later.removed == ("1", "3")
    reset = group_plan(group(4, ["0"], mode="update"), members={}, removed=plan.removed)
    assert reset.members == ("1", "2", "3", "4"), "update mode replaces what was removed before"


def test_a_group_template_has_one_resource_per_member_with_the_index_substituted() -> None:
    props = group(2, ["0"])
    template = group_template(props, group_plan(props, members={}, removed=()), Budget())
    assert template["resources"] == {
        "1": {"type": "My::T", "properties": {"name": "m-1", "tags": ["1", 7]}},
        "2": {"type": "My::T", "properties": {"name": "m-2", "tags": ["2", 7]}},
    }
    assert template["outputs"]["removed_rsrc_list"] == {"value": ["0"]}


def test_group_attributes_list_refs_attributes_and_each_member() -> None:
    members = [
        Member("10", "r10", {"ip": "b"}),
        Member("2", "r2", {"ip": "a", "only": 1}),
    ]
    attrs = child_attributes(
        "OS::Heat::ResourceGroup",
        child_id="c",
        child_name="n",
        outputs={"removed_rsrc_list": OutputValue(["1"])},
        members=members,
    )
    assert attrs["refs"] == ["r2", "r10"], "in index order, not text order"
    assert attrs["refs_map"] == {"2": "r2", "10": "r10"}
    assert attrs["ip"] == ["a", "b"]
    assert attrs["only"] == [1, None]
    assert attrs["attributes"] == {"ip": {"2": "a", "10": "b"}, "only": {"2": 1, "10": None}}
    assert attrs["outputs"]["10"] == {"ip": "b"}
    assert attrs["removed_rsrc_list"] == ["1"]
    read = GroupAttributes(attrs)
    assert read["resource.2"] == "r2", "member 2's reference id, as Heat's get_attr [group, resource.2]"
    assert read["resource.10.ip"] == "b"
    assert read.get("resource.3.ip") is None
    assert read.get("resource.2.missing") is None


def test_get_attr_of_a_group_member_gives_its_reference_id_or_its_attribute_as_heat() -> None:
    members = [Member("0", "r0", {"ip": "a", "net": {"cidr": "10.0.0.0/24"}}), Member("1", "r1", {"ip": "b"})]
    attrs = child_attributes(
        "OS::Heat::ResourceGroup", child_id="c", child_name="n", outputs={}, members=members
    )
    data = {"group": ResourceData("gid", GroupAttributes(attrs))}

    def get_attr(attribute: str, *keys: str) -> Any:
        return GetAttr("group", attribute, keys, "outputs.o.value").resolve(data, Budget())

    assert get_attr("resource.1") == "r1"
    assert get_attr("resource.1", "ip") == "b"
    assert get_attr("resource.1.ip") == "b"
    assert get_attr("resource.0", "net", "cidr") == get_attr("resource.0.net", "cidr") == "10.0.0.0/24"
    assert get_attr("resource.0", "missing") is None
    assert get_attr("resource.5") is None
    assert get_attr("refs") == ["r0", "r1"]


def test_a_stack_resource_exposes_outputs_by_name_as_a_map_and_as_a_list() -> None:
    outputs = {"x": OutputValue(1, "the x"), "y": OutputValue(None, error="Resource a is not available")}
    attrs = child_attributes("OS::Heat::Stack", child_id="c", child_name="top-inner-1", outputs=outputs)
    assert attrs["x"] == 1
    assert attrs["outputs"] == {"x": 1, "y": None}
    assert attrs["outputs_list"][0] == {"output_key": "x", "output_value": 1, "description": "the x"}
    assert attrs["stack_name"] == "top-inner-1"


def test_a_template_resource_is_referenced_by_its_child_id_unless_an_output_says_otherwise() -> None:
    plain = child_attributes("t.yaml", child_id="c1", child_name="n", outputs={"o": OutputValue(2)})
    assert plain == {"OS::stack_id": "c1", "o": 2}
    custom = child_attributes(
        "t.yaml", child_id="c1", child_name="n", outputs={"OS::stack_id": OutputValue("z")}
    )
    assert custom["OS::stack_id"] == "z"


def test_child_goals_of_each_type_inherit_the_registry_and_files_but_not_the_parameters() -> None:
    files = {"t.yaml": "heat_template_version: 2016-10-14\n"}
    stack = child_goal(
        "OS::Heat::Stack",
        with_digest({"template": {"heat_template_version": "2016-10-14"}, "parameters": {"p": 1}}, "d"),
        environment=ENV,
        files=files,
        timeout_mins=9,
    )
    assert stack.parameters == {"p": 1}
    assert stack.timeout_mins == 9
    assert stack.environment == {"resource_registry": {"My::T": "t.yaml"}}
    assert stack.files == files
    own_timeout = child_goal(
        "OS::Heat::Stack", {"template": "x", "timeout": 3}, environment={}, files={}, timeout_mins=9
    )
    assert own_timeout.timeout_mins == 3
    template = child_goal("t.yaml", {"a": 1, GOAL_KEY: "d"}, environment=ENV, files=files, timeout_mins=None)
    assert (template.template, template.parameters) == (files["t.yaml"], {"a": 1}), "properties -> parameters"
    grouped = child_goal(
        "OS::Heat::ResourceGroup", group(2).model_dump(), environment=ENV, files=files, timeout_mins=None
    )
    assert isinstance(grouped.template, dict)
    assert sorted(grouped.template["resources"]) == ["0", "1"]


@pytest.mark.parametrize(
    ("type_name", "properties", "problem"),
    [
        ("missing.yaml", {}, "template file 'missing.yaml' is not in the stack's files"),
        ("OS::Heat::Stack", {"parameters": {}}, "OS::Heat::Stack property template: Field required"),
        ("OS::Heat::ResourceGroup", {"count": -1, "resource_def": {"type": "T"}}, "property count"),
    ],
)
def test_properties_that_cannot_make_a_child_say_why(
    type_name: str, properties: dict[str, Any], problem: str
) -> None:
    with pytest.raises(NestedInvalid, match=problem):
        child_goal(type_name, properties, environment={}, files={}, timeout_mins=None)


def test_child_names_follow_heat_and_stay_bounded() -> None:
    child_id = str(uuid.UUID(int=0xABCDEF))
    assert child_name("top", "inner", child_id) == "top-inner-000000000000"
    assert len(child_name("x" * 300, "r", child_id)) <= 200


def nested_row(properties: dict[str, Any] | None, *, status: Status = Status.COMPLETE) -> ResourceRow:
    return ResourceRow(
        ResourceId(1),
        StackId(uuid.uuid4()),
        "inner",
        "OS::Heat::Stack",
        "child-id",
        Action.UPDATE,
        status,
        properties=properties,
    )


def decide(row: ResourceRow, properties: dict[str, Any]) -> Forward:
    return decide_forward(
        row,
        type_name="OS::Heat::Stack",
        schema=StackProperties,
        properties=properties,
        external_id=None,
        nested=True,
    ).kind


def test_a_child_is_updated_in_place_never_replaced_and_left_alone_when_nothing_changed() -> None:
    same = with_digest({"template": "t", "parameters": {"a": 1}}, goal_digest(ENV, {}))
    assert decide(nested_row(same), same) is Forward.NOTHING
    changed = {**same, "parameters": {"a": 2}}
    assert decide(nested_row(same), changed) is Forward.UPDATE
    other_files = with_digest({"template": "t", "parameters": {"a": 1}}, goal_digest(ENV, {"f.yaml": "x"}))
    assert decide(nested_row(same), other_files) is Forward.UPDATE, "files the child may read changed"
    assert decide(nested_row(same, status=Status.FAILED), same) is Forward.UPDATE, "a failed child is updated"
    failed_create = ResourceRow(
        ResourceId(1), StackId(uuid.uuid4()), "inner", "OS::Heat::Stack", "c", Action.CREATE, Status.FAILED
    )
    assert decide(failed_create, same) is Forward.UPDATE, "its own resources decide what is replaced"
    assert goal_digest({"parameters": {"x": 1}}, {}) == goal_digest({}, {}), (
        "the parent's inputs do not count"
    )


def test_template_resources_compare_properties_without_a_schema() -> None:
    row = ResourceRow(
        ResourceId(1),
        StackId(uuid.uuid4()),
        "m",
        "t.yaml",
        "c",
        Action.CREATE,
        Status.COMPLETE,
        properties={"a": 1, GOAL_KEY: "d"},
    )

    def kind(props: dict[str, Any]) -> Forward:
        return decide_forward(
            row, type_name="t.yaml", schema=None, properties=props, external_id=None, nested=True
        ).kind

    assert kind({"a": 1, GOAL_KEY: "d"}) is Forward.NOTHING
    assert kind({"a": 1, "b": 2, GOAL_KEY: "d"}) is Forward.UPDATE
    assert kind({GOAL_KEY: "d"}) is Forward.UPDATE


async def test_a_worker_refuses_a_nested_job_it_is_handed() -> None:
    job = ResourceJob(
        job_id="j1",
        stack_id="s",
        stack_name="s",
        project_id="p",
        traversal_id="t",
        resource_id=1,
        resource_name="inner",
        resource_type="OS::Heat::Stack",
        action=JobAction.CREATE,
        properties={"template": "heat_template_version: 2016-10-14"},
        deadline=1e12,
    )
    result = await run_job(job, deps=PluginRuntime(types=load_types()), log=structlog.get_logger())
    assert result.outcome is JobOutcome.FAILED
    assert "run by the engine as a nested stack" in result.reason


def test_a_child_gets_the_registry_section_written_under_its_resource_as_heat_hands_it_down() -> None:
    from services.engine.core.nesting import child_environment

    parent = {
        "resource_registry": {
            "My::T": "OS::Heat::None",
            "resources": {
                "gro*": {"*": {"hooks": "pre-create"}},
                "group": {"0": {"hooks": "pre-delete"}, "hooks": "pre-update"},
                "other": {"x": {"hooks": "pre-create"}},
            },
        },
        "parameter_defaults": {"p": 1},
    }
    child = child_environment(parent, "group")
    assert child == {
        "resource_registry": {
            "My::T": "OS::Heat::None",
            "resources": {"*": {"hooks": "pre-create"}, "0": {"hooks": "pre-delete"}},
        },
        "parameter_defaults": {"p": 1},
    }
    assert child_environment(parent, "lone")["resource_registry"] == {"My::T": "OS::Heat::None"}
