"""`validate`'s checks of child stacks, pure: the path each error names into a template
resource's child, an inline OS::Heat::Stack template and a group's resource_def, and a
fan-out of one file checked once with its errors capped."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from services.engine.goals import GoalSpec, validate_goal
from services.engine.template import DEFAULT_LIMITS, TemplateInvalid
from shared.plugins.registry import load_types

TYPES = load_types()


def validate(template: dict[str, Any], files: dict[str, str] | None = None, **env: Any) -> dict[str, Any]:
    spec = GoalSpec(template=template, files=files or {}, environment=env)
    return validate_goal(spec, "p", TYPES, DEFAULT_LIMITS)


def errors(template: dict[str, Any], files: dict[str, str] | None = None, **env: Any) -> list[str]:
    with pytest.raises(TemplateInvalid) as refused:
        validate(template, files, **env)
    return [str(e) for e in refused.value.errors]


def hot(**resources: Any) -> dict[str, Any]:
    return {"heat_template_version": "2016-10-14", "resources": resources}


BAD = yaml.safe_dump(
    {
        "heat_template_version": "2016-10-14",
        "parameters": {"n": {"type": "number", "constraints": [{"range": {"max": 5}}]}},
        "resources": {"x": {"type": "OS::Heat::Valu"}},
    }
)


def test_each_kind_of_child_is_checked_and_its_errors_name_the_path_into_it() -> None:
    assert errors(hot(web={"type": "web.yaml", "properties": {"n": 1}}), {"web.yaml": BAD})[0].startswith(
        "resources.web<web.yaml>.resources.x.type: unknown resource type 'OS::Heat::Valu'"
    )
    mapped = errors(
        hot(web={"type": "My::Web", "properties": {"n": 1}}),
        {"web.yaml": BAD},
        resource_registry={"My::Web": "web.yaml"},
    )
    assert mapped[0].startswith("resources.web<web.yaml>.resources.x.type")
    inline = {"type": "OS::Heat::Stack", "properties": {"template": BAD}}
    assert errors(hot(st=inline))[0].startswith("resources.st.properties.template.resources.x.type")
    member = {"type": "OS::Heat::RandomString", "properties": {"length": "%index%x"}}
    group = {"type": "OS::Heat::ResourceGroup", "properties": {"count": 3, "resource_def": member}}
    assert errors(hot(g=group))[0].startswith("resources.g.properties.resource_def.properties.length")


def test_known_values_are_checked_in_the_child_and_unknown_ones_are_not_required() -> None:
    fixed = BAD.replace("OS::Heat::Valu", "OS::Heat::None")
    found = errors(hot(web={"type": "web.yaml", "properties": {"n": 9}}), {"web.yaml": fixed})
    assert found[0].startswith("resources.web<web.yaml>.parameters.n")
    later = {"type": "web.yaml", "properties": {"n": {"get_attr": ["r", "value"]}}}
    assert "Parameters" in validate(hot(r={"type": "OS::Heat::RandomString"}, web=later), {"web.yaml": fixed})
    empty = {"type": "OS::Heat::ResourceGroup", "properties": {"count": 0, "resource_def": {"type": "Nope"}}}
    assert "Parameters" in validate(hot(g=empty)), "a group of no members has nothing to check, as in Heat"


def test_a_fan_out_of_one_bad_file_is_checked_once_and_reports_a_bounded_number_of_errors() -> None:
    files = {"l4.yaml": BAD}
    for level in (3, 2, 1, 0):
        resources = {
            f"r{i}": {"type": f"l{level + 1}.yaml", "properties": {"n": 1} if level == 3 else {}}
            for i in range(40)
        }
        files[f"l{level}.yaml"] = yaml.safe_dump(
            {"heat_template_version": "2016-10-14", "resources": resources}
        )
    top = hot(**{f"t{i}": {"type": "l0.yaml"} for i in range(40)})
    found = errors(top, files)
    assert 0 < len(found) <= 20
    assert found[0].startswith("resources.t0<l0.yaml>.resources.r0<l1.yaml>.resources.r0<l2.yaml>")


def test_validate_checks_a_groups_update_policy() -> None:
    group = {
        "type": "OS::Heat::ResourceGroup",
        "update_policy": {"batch_create": {"max_batch_size": 0}},
        "properties": {"count": 2, "resource_def": {"type": "OS::Heat::None"}},
    }
    assert errors(hot(g=group))[0].startswith("resources.g.update_policy.batch_create.max_batch_size")
