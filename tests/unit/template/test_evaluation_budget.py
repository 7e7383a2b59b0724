"""One evaluation budget per request: every expanding function, and YAML aliases, stop
before they build what they would produce; the refusal names the function, the
template path, the limit and its setting.

Real: the template layer (loader, compiler, functions, resolution); resource types
are the declaration-only test types. "Before building" is shown with tracemalloc:
the peak of memory allocated while the request is refused stays far below what
the refused value would have taken.
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from services.engine.template import (
    DEFAULT_LIMITS,
    Budget,
    BudgetExceeded,
    ResolutionError,
    ResourceData,
    TemplateInvalid,
    TemplateLimits,
    load_stack,
    parse_template,
    resolve_outputs,
    resolve_properties,
)
from services.engine.template.loader import DocumentError, load_document
from shared.errors import InvalidInput

from .helpers import IDENTITY, TYPES

LATEST = "2021-04-16"
DEP = {"get_attr": ["dep", "output"]}
MIB = 1024 * 1024
PATH = "resources.subject.properties.value"


def _template(snippet: Any, parameters: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "heat_template_version": LATEST,
        "parameters": parameters or {},
        "resources": {
            "dep": {"type": "OS::Heat::TestResource"},
            "subject": {"type": "OS::Heat::Value", "properties": {"value": snippet}},
        },
    }


def _load(snippet: Any, limits: TemplateLimits = DEFAULT_LIMITS, **kwargs: Any) -> Any:
    return load_stack(_template(snippet), types=TYPES, identity=IDENTITY, limits=limits, **kwargs)


@contextmanager
def peak_allocation() -> Iterator[Callable[[], int]]:
    """The most memory (bytes) Python allocated at once inside the block."""
    tracemalloc.start()
    tracemalloc.reset_peak()
    try:
        yield lambda: tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def refusal(snippet: Any, limits: TemplateLimits = DEFAULT_LIMITS) -> tuple[BudgetExceeded, int]:
    with peak_allocation() as peak, pytest.raises(BudgetExceeded) as caught:
        _load(snippet, limits)
    return caught.value, peak()


def test_str_replace_is_refused_before_its_result_is_built() -> None:
    # C3b: 15,000 placeholders each replaced by 15,000 characters is a 225 MB string.
    snippet = {"str_replace": {"template": "a" * 15_000, "params": {"a": "b" * 15_000}}}
    error, peak = refusal(snippet)
    assert error.path == f"{PATH}.str_replace"
    message = str(error)
    assert message.startswith(f"{PATH}.str_replace: str_replace would produce 225000000 bytes of strings")
    assert "16777216 bytes; raise it with CONVERGE_MAX_EVALUATION_BYTES" in message
    assert peak < 4 * MIB


def test_repeat_counts_its_product_before_building_it() -> None:
    # C3c: three lists of 150 numbers ask for 3,375,000 items.
    numbers = list(range(150))
    snippet = {"repeat": {"for_each": {"X": numbers, "Y": numbers, "Z": numbers}, "template": "X-Y-Z"}}
    error, peak = refusal(snippet)
    assert error.path == f"{PATH}.repeat"
    assert "repeat would produce 3375000 items" in str(error)
    assert "200000 items; raise it with CONVERGE_MAX_EVALUATION_ITEMS" in str(error)
    assert peak < 4 * MIB


def test_repeat_pays_for_what_substitution_adds() -> None:
    snippet = {"repeat": {"for_each": {"X": ["y" * 5000] * 10}, "template": "X" * 1000}}
    error, peak = refusal(snippet, TemplateLimits(max_evaluation_bytes=1 * MIB))
    assert error.path == f"{PATH}.repeat"
    assert peak < 4 * MIB


@pytest.mark.parametrize(
    ("snippet", "function", "unit"),
    [
        ({"list_join": ["-" * 1000, ["x"] * 2000]}, "list_join", "bytes"),
        ({"list_join": [",", [{"k": "v" * 1000}] * 2000]}, "list_join", "bytes"),
        ({"str_split": [",", "," * 300_000]}, "str_split", "items"),
        ({"list_concat": [["x"] * 150_000, ["y"] * 150_000]}, "list_concat", "items"),
        ({"list_concat_unique": [list(range(150_000)), list(range(150_000))]}, "list_concat_unique", "items"),
        (
            {"map_merge": [{f"k{i}": i for i in range(150_000)}, {f"j{i}": i for i in range(150_000)}]},
            "map_merge",
            "items",
        ),
        ({"filter": [[1], list(range(250_000))]}, "filter", "items"),
    ],
    ids=[
        "list_join",
        "list_join of maps",
        "str_split",
        "list_concat",
        "list_concat_unique",
        "map_merge",
        "filter",
    ],
)
def test_each_expanding_function_is_bounded(snippet: Any, function: str, unit: str) -> None:
    limits = TemplateLimits(max_evaluation_bytes=1 * MIB, max_template_bytes=64 * MIB)
    with pytest.raises(BudgetExceeded) as caught:
        _load(snippet, limits)
    assert caught.value.path == f"{PATH}.{function}"
    assert f"{function} would produce" in str(caught.value)
    assert f"raise it with CONVERGE_MAX_EVALUATION_{unit.upper()}" in str(caught.value)


def test_the_budget_is_shared_by_the_whole_request() -> None:
    # Each str_replace is small; together they are not.
    template = {
        "heat_template_version": LATEST,
        "resources": {
            f"r{i}": {
                "type": "OS::Heat::Value",
                "properties": {"value": {"str_replace": {"template": "x" * 100, "params": {"x": "y" * 100}}}},
            }
            for i in range(100)
        },
    }
    limits = TemplateLimits(max_evaluation_bytes=500_000)
    with pytest.raises(BudgetExceeded, match=r"resources\.r\d+\.properties\.value\.str_replace"):
        load_stack(template, types=TYPES, identity=IDENTITY, limits=limits)
    load_stack(
        template, types=TYPES, identity=IDENTITY, limits=TemplateLimits(max_evaluation_bytes=2_000_000)
    )


def test_a_budget_error_stops_the_load_and_is_invalid_input() -> None:
    error, _ = refusal({"str_replace": {"template": "a" * 5000, "params": {"a": "b" * 5000}}})
    assert isinstance(error, InvalidInput)
    assert isinstance(error, ResolutionError)


def test_check_time_functions_are_bounded_too() -> None:
    stack = _load({"list_join": [",", DEP]}, TemplateLimits(max_evaluation_bytes=100_000))
    data = {"dep": ResourceData("dep-id", {"output": ["x" * 1000] * 200})}
    with pytest.raises(BudgetExceeded) as caught:
        resolve_properties(stack, "subject", data)
    assert caught.value.path == f"{PATH}.list_join"
    assert "CONVERGE_MAX_EVALUATION_BYTES" in str(caught.value)
    # the same data within the budget resolves
    assert resolve_properties(stack, "subject", data, budget=Budget(TemplateLimits()))["value"]


def test_a_value_referenced_many_times_is_paid_for_each_time_it_is_copied() -> None:
    # get_param shares one value; the resolved properties (stored, sent to workers) copy it.
    template = _template([{"get_param": "big"}] * 2000, {"big": {"type": "string", "default": "x" * 10_000}})
    stack = load_stack(template, types=TYPES, identity=IDENTITY)
    with peak_allocation() as peak, pytest.raises(BudgetExceeded) as caught:
        resolve_properties(stack, "subject", {})
    assert caught.value.path == "resources.subject.properties"
    assert "the resolved properties would produce" in str(caught.value)
    assert peak() < 4 * MIB


def test_an_output_over_the_budget_carries_the_error() -> None:
    stack = load_stack(
        {
            "heat_template_version": LATEST,
            "resources": {"dep": {"type": "OS::Heat::TestResource"}},
            "outputs": {"joined": {"value": {"list_join": [",", DEP]}}},
        },
        types=TYPES,
        identity=IDENTITY,
        limits=TemplateLimits(max_evaluation_bytes=100_000),
    )
    outputs = resolve_outputs(stack, {"dep": ResourceData("dep-id", {"output": ["x" * 1000] * 200})})
    assert outputs["joined"].value is None
    assert outputs["joined"].error is not None
    assert "outputs.joined.value.list_join: list_join would produce" in outputs["joined"].error


# --- documents ---------------------------------------------------------------------------


def _alias_bomb(length: int, copies: int) -> str:
    # C3a: a long anchored scalar, aliased many times.
    aliases = ", ".join(["*a"] * copies)
    return (
        "heat_template_version: 2018-08-31\n"
        f"parameters: {{p: {{type: string, default: &a {'x' * length}}}}}\n"
        f"resources: {{v: {{type: OS::Heat::Value, properties: {{value: [{aliases}]}}}}}}\n"
    )


def test_aliases_of_a_long_scalar_count_its_bytes() -> None:
    text = _alias_bomb(100_000, 2000)  # 108 KB that expands to 200 MB
    with peak_allocation() as peak, pytest.raises(TemplateInvalid) as caught:
        parse_template(text)
    assert "template expands to more than 1048576 bytes with its YAML aliases" in str(caught.value)
    assert "CONVERGE_MAX_TEMPLATE_BYTES" in str(caught.value)
    assert peak() < 8 * MIB


def test_alias_repeats_are_charged_to_the_budget() -> None:
    with pytest.raises(DocumentError, match="expands to more than the evaluation budget allows"):
        load_document(
            _alias_bomb(100, 2000),
            limits=TemplateLimits(),
            budget=Budget(TemplateLimits(max_evaluation_bytes=100_000)),
        )


def test_ordinary_aliases_still_load() -> None:
    text = (
        "heat_template_version: 2018-08-31\nparameters: {p: {type: string, default: &a abc}}\nx: [*a, *a]\n"
    )
    assert load_document(text, limits=TemplateLimits())["x"] == ["abc", "abc"]


def test_a_mapping_is_measured_while_walked_not_serialised() -> None:
    shared = "x" * 100_000
    document = {"heat_template_version": "2018-08-31", "resources": {}, "description": [shared] * 2000}
    with peak_allocation() as peak, pytest.raises(DocumentError) as caught:
        load_document(document, limits=TemplateLimits())
    message = str(caught.value)
    assert "template size exceeds the maximum allowed size (1048576 bytes; raise it with" in message
    assert "CONVERGE_MAX_TEMPLATE_BYTES" in message
    assert peak() < 4 * MIB


# --- the group's count -------------------------------------------------------------------


def test_a_group_count_over_the_resource_limit_is_refused_when_the_stack_loads() -> None:
    from services.engine.core.groups import check_group_sizes
    from shared.plugins.registry import load_types

    template = {
        "heat_template_version": "2018-08-31",
        "resources": {
            "g": {
                "type": "OS::Heat::ResourceGroup",
                "properties": {"count": 1_000_000, "resource_def": {"type": "OS::Heat::None"}},
            }
        },
    }
    definition = load_stack(template, types=dict(load_types()), identity=IDENTITY)
    with pytest.raises(TemplateInvalid) as caught:
        check_group_sizes(definition)
    (error,) = caught.value.errors
    assert error.path == "resources.g.properties.count"
    assert "1000000 members are more than a stack may hold" in error.message
    assert "max_resources 100000; raise it with CONVERGE_MAX_RESOURCES_PER_STACK" in error.message


def test_a_group_whose_template_would_be_too_big_is_refused_before_it_is_built() -> None:
    from services.engine.core.child_goals import child_goal
    from services.engine.core.nesting import NestedInvalid

    properties = {"count": 90_000, "resource_def": {"type": "OS::Heat::None", "properties": {"a": "b" * 100}}}
    with peak_allocation() as peak, pytest.raises(NestedInvalid) as caught:
        child_goal("OS::Heat::ResourceGroup", properties, environment={}, files={}, timeout_mins=None)
    assert "members make a nested template of about" in str(caught.value)
    assert "CONVERGE_MAX_TEMPLATE_BYTES" in str(caught.value)
    assert peak() < 1 * MIB


def test_building_a_group_is_charged_to_the_budget() -> None:
    from services.engine.core.child_goals import child_goal

    properties = {"count": 5000, "resource_def": {"type": "OS::Heat::None", "properties": {"a": "b"}}}
    small = Budget(TemplateLimits(max_evaluation_items=1000))
    with pytest.raises(BudgetExceeded, match="would produce"):
        child_goal(
            "OS::Heat::ResourceGroup",
            properties,
            environment={},
            files={},
            timeout_mins=None,
            budget=small,
        )
