"""Proves entry-point discovery and its errors; real importlib.metadata and real
installed packages (Converge itself and tests/plugins/converge_example_plugin)."""

from __future__ import annotations

from importlib.metadata import EntryPoint

import pytest

from shared.errors import PermanentError
from shared.plugins.builtin.placeholders import NoneResource
from shared.plugins.registry import ENTRY_POINT_GROUP, PluginLoadError, load_types

BUILTINS = {
    "OS::Heat::TestResource",
    "OS::Heat::None",
    "OS::Heat::Value",
    "OS::Heat::RandomString",
    "OS::Heat::WaitConditionHandle",
    "OS::Heat::WaitCondition",
    "Converge::HTTP::Resource",
}


def point(name: str, value: str) -> EntryPoint:
    return EntryPoint(name=name, value=value, group=ENTRY_POINT_GROUP)


def test_builtin_types_are_discovered_through_entry_points() -> None:
    types = load_types()
    assert set(types) >= BUILTINS
    assert all(types[name].type_name == name for name in types)


def test_third_party_plugin_package_is_discovered() -> None:
    types = load_types()
    thing = types["Example::Thing"]
    assert thing.__module__ == "converge_example_plugin"


def test_unimportable_plugin_names_the_entry_point() -> None:
    with pytest.raises(PluginLoadError, match=r"'Example::Gone'.*cannot import.*no_such_module"):
        load_types([point("Example::Gone", "no_such_module_for_converge:Thing")])


def test_missing_class_in_module_names_the_entry_point() -> None:
    with pytest.raises(PluginLoadError, match=r"'Example::Gone'.*cannot import"):
        load_types([point("Example::Gone", "converge_example_plugin.misfits:Nothing")])


def test_class_not_deriving_from_resource_type_is_refused() -> None:
    with pytest.raises(PluginLoadError, match="not a ResourceType subclass"):
        load_types([point("Example::NotAType", "converge_example_plugin.misfits:NotAResourceType")])


def test_the_base_class_itself_is_refused() -> None:
    with pytest.raises(PluginLoadError, match="base class itself"):
        load_types([point("Example::Base", "shared.plugins.base:ResourceType")])


def test_entry_point_name_must_equal_type_name() -> None:
    with pytest.raises(PluginLoadError, match=r"'Example::Other'.*declares type_name 'Example::Misnamed'"):
        load_types([point("Example::Other", "converge_example_plugin.misfits:Misnamed")])


def test_two_plugins_claiming_one_name_is_an_error_naming_both() -> None:
    found = [
        point("OS::Heat::None", "shared.plugins.builtin.placeholders:NoneResource"),
        point("OS::Heat::None", "converge_example_plugin.misfits:SecondNone"),
    ]
    with pytest.raises(PluginLoadError, match=r"misfits:SecondNone.*duplicate.*placeholders:NoneResource"):
        load_types(found)


def test_the_same_class_listed_twice_is_not_a_duplicate() -> None:
    value = "shared.plugins.builtin.placeholders:NoneResource"
    found = [point("OS::Heat::None", value), point("OS::Heat::None", value)]
    assert load_types(found) == {"OS::Heat::None": NoneResource}


def test_plugin_load_error_is_permanent() -> None:
    assert issubclass(PluginLoadError, PermanentError)
