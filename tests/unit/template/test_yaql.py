"""The `yaql` function and condition function: Heat's results, errors with their paths, limits.

Real: the template layer and the `yaql` library; resource types are the
declaration-only test types. Expected values are Heat's (heat/tests/test_hot.py
cases and yaql's semantics); a value known at load is folded then, one needing
a resource attribute is evaluated when the resource resolves.
"""

from __future__ import annotations

import pickle
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
    resolve_outputs,
    resolve_properties,
)
from services.engine.template.resolve import needs_worker, resolve_goal, resolve_output_values

from .helpers import IDENTITY, TYPES

PATH = "resources.subject.properties.value"
DEP = {"get_attr": ["dep", "output"]}


def _template(snippet: Any, version: str = "2021-04-16", **sections: Any) -> dict[str, Any]:
    return {
        "heat_template_version": version,
        "resources": {
            "dep": {"type": "OS::Heat::TestResource"},
            "subject": {"type": "OS::Heat::Value", "properties": {"value": snippet}},
        },
        **sections,
    }


def _load(snippet: Any, limits: TemplateLimits = DEFAULT_LIMITS, **kwargs: Any) -> Any:
    return load_stack(_template(snippet, **kwargs), types=TYPES, identity=IDENTITY, limits=limits)


def evaluate(snippet: Any, output: Any = None, limits: TemplateLimits = DEFAULT_LIMITS) -> Any:
    stack = _load(snippet, limits)
    data = {"dep": ResourceData("dep-id", {"output": output})}
    return resolve_properties(stack, "subject", data).get("value")


def load_error(snippet: Any, limits: TemplateLimits = DEFAULT_LIMITS, **kwargs: Any) -> str:
    with pytest.raises(TemplateInvalid) as caught:
        _load(snippet, limits, **kwargs)
    (error,) = caught.value.errors
    return str(error)


def yaql(expression: Any, data: Any = None) -> dict[str, Any]:
    args: dict[str, Any] = {"expression": expression}
    if data is not None:
        args["data"] = data
    return {"yaql": args}


# (id, snippet, expected): Heat's test_hot yaql cases and TripleO-style shapes
RESULTS: list[tuple[str, Any, Any]] = [
    ("sum of a map's list", yaql("$.data.var1.sum()", {"var1": [1, 2, 3, 4]}), 10),
    ("list data", yaql("$.data.sum()", [1, 2, 3, 4]), 10),
    ("string data", yaql("$.data", "whynotastring"), "whynotastring"),
    ("number data", yaql("$.data + 2", 2), 4),
    ("no data", yaql("1 + 3"), 4),
    ("data from a function", yaql("$.data.var1.len()", {"var1": {"list_join": ["", ["1", "2"]]}}), 2),
    (
        "reduce with mergeWith",
        yaql("$.data.d.reduce($1.mergeWith($2))", {"d": [{"a": [1]}, {"a": [2]}, {"a": [3]}]}),
        {"a": [1, 2, 3]},
    ),
    (
        "toDict over a list of maps",
        yaql(
            "$.data.roles.toDict($.name, $.get(count))",
            {"roles": [{"name": "a", "count": 1}, {"name": "b"}]},
        ),
        {"a": 1, "b": None},
    ),
    (
        "dict of pairs, selected where",
        yaql(
            "dict($.data.nets.where($.enabled).select([$.name, $.cidr]))",
            {
                "nets": [
                    {"name": "ext", "cidr": "10.0.0.0/24", "enabled": True},
                    {"name": "x", "enabled": False},
                ]
            },
        ),
        {"ext": "10.0.0.0/24"},
    ),
    ("a set becomes a sorted list", yaql("set(3, 1, 2)"), [1, 2, 3]),
    ("null in a result", yaql("[$.data.get(missing)]", {}), [None]),
    ("distinct keeps the first order", yaql("$.data.distinct()", ["b", "a", "b"]), ["b", "a"]),
]


@pytest.mark.parametrize(("snippet", "expected"), [c[1:] for c in RESULTS], ids=[c[0] for c in RESULTS])
def test_yaql_gives_heats_result(snippet: Any, expected: Any) -> None:
    assert evaluate(snippet) == expected


def test_yaql_on_a_resource_attribute_is_evaluated_when_the_resource_resolves() -> None:
    snippet = yaql("$.data.servers.select($.name).join(',')", {"servers": DEP})
    stack = _load(snippet)
    assert needs_worker(stack, "subject")
    assert not needs_worker(stack, "dep")
    assert evaluate(snippet, output=[{"name": "a"}, {"name": "b"}]) == "a,b"


def test_the_expression_and_data_may_come_from_functions() -> None:
    template = _template(
        {
            "yaql": {
                "expression": {"str_replace": {"template": "$.data.select($ * N)", "params": {"N": "3"}}},
                "data": {"get_param": "numbers"},
            }
        },
        parameters={"numbers": {"type": "json", "default": [1, 2]}},
    )
    stack = load_stack(template, types=TYPES, identity=IDENTITY)
    assert stack.resources["subject"].properties == {"value": [3, 6]}
    expression_later = yaql({"get_attr": ["dep", "output"]}, [1, 2])
    assert evaluate(expression_later, output="$.data.sum()") == 3


def test_a_folded_yaql_needs_no_worker_at_check_time() -> None:
    stack = _load(yaql("$.data.len()", [1, 2]))
    assert stack.resources["subject"].properties == {"value": 2}
    assert not needs_worker(stack, "subject")


def test_the_check_time_jobs_pickle_and_give_the_inline_results() -> None:
    snippet = yaql("$.data.n * 2", {"n": DEP})
    template = _template(snippet, outputs={"twice": {"value": snippet}})
    stack = load_stack(template, types=TYPES, identity=IDENTITY)
    data = {"dep": ResourceData("dep-id", {"output": 21})}
    assert needs_worker(stack)
    resource, outputs = pickle.loads(pickle.dumps((stack.resources["subject"], dict(stack.outputs))))
    assert resolve_goal(resource, data, stack.limits) == ({"value": 42}, {})
    assert resolve_output_values(outputs, data, stack.limits)["twice"].value == 42
    assert resolve_outputs(stack, data)["twice"].value == 42


# (id, snippet, fragment): each a 400 naming the path, as validate shows it
LOAD_ERRORS: list[tuple[str, Any, str]] = [
    ("arguments not a map", {"yaql": "invalid"}, f"{PATH}.yaql: yaql: arguments must be a map"),
    ("no expression", {"yaql": {"data": {}}}, "expected the keys 'expression' and optionally 'data'"),
    ("unknown key", {"yaql": {"expression": "1", "data": {}, "bogus": ""}}, "(unknown: bogus)"),
    ("expression not a string", yaql(["$.data"]), "the expression must be a string, not a list"),
    (
        "bad expression",
        yaql("invalid(", {"var1": [1, 2, 3, 4]}),
        f"{PATH}.yaql: yaql: Bad expression Parse error: unexpected end of statement",
    ),
    ("evaluation fails", yaql("1 / $.data", 0), "evaluating '1 / $.data' failed: ZeroDivisionError"),
    ("no such method", yaql("$.data.nosuch()", 1), 'Unknown method "nosuch"'),
    (
        "collection over yaql's iterator limit",
        yaql("range(300).select($ * 2)"),
        "exceeded yaql's limit of 200 items (as Heat's [yaql] limit_iterators; "
        "raise it with CONVERGE_YAQL_LIMIT_ITERATORS)",
    ),
    (
        "value over yaql's memory quota",
        yaql("$.data * 20000", "x"),
        "exceeded yaql's limit of 10000 bytes (as Heat's [yaql] memory_quota; "
        "raise it with CONVERGE_YAQL_MEMORY_QUOTA)",
    ),
    ("result not JSON", yaql("now()"), "the result is not JSON data: it holds a datetime"),
]


@pytest.mark.parametrize(
    ("snippet", "fragment"), [c[1:] for c in LOAD_ERRORS], ids=[c[0] for c in LOAD_ERRORS]
)
def test_a_bad_yaql_is_refused_at_load_naming_its_path(snippet: Any, fragment: str) -> None:
    message = load_error(snippet)
    assert message.startswith(f"{PATH}.yaql: yaql: ")
    assert fragment in message


def test_a_bad_expression_is_refused_even_while_its_data_waits_for_a_resource() -> None:
    message = load_error(yaql("$.data.(", DEP))
    assert message.startswith(f"{PATH}.yaql: yaql: Bad expression")


def test_an_evaluation_failing_on_resource_data_fails_the_resolution_at_its_path() -> None:
    with pytest.raises(ResolutionError) as caught:
        evaluate(yaql("$.data.len()", DEP), output=5)
    assert caught.value.path == f"{PATH}.yaql"
    assert 'No method "len" for receiver 5' in str(caught.value)


def test_an_expression_longer_than_the_setting_is_refused_before_it_is_parsed() -> None:
    limits = TemplateLimits(max_yaql_expression_length=100)
    message = load_error(yaql("1 + " * 30 + "1"), limits)
    assert message == (
        f"{PATH}.yaql: yaql: the expression is 121 characters long, more than the 100 allowed "
        "(raise it with CONVERGE_MAX_YAQL_EXPRESSION_LENGTH)"
    )
    assert evaluate(yaql("1 + " * 24 + "1"), limits=limits) == 25


def test_yaqls_own_limits_are_settings() -> None:
    limits = TemplateLimits(yaql_limit_iterators=1000, yaql_memory_quota=100_000)
    assert evaluate(yaql("range(300).select($ * 2).sum()"), limits=limits) == 89700
    assert evaluate(yaql("$.data * 20000", "x"), limits=limits) == "x" * 20000


def test_every_yaql_call_and_the_result_count_against_the_evaluation_budget() -> None:
    # 60 x 60 inner calls stay within yaql's own limits but not a 2,000-item budget.
    expensive = yaql("range(60).select(range(60).select($ + 1).sum()).sum()")
    limits = TemplateLimits(max_evaluation_items=2_000)
    with pytest.raises(BudgetExceeded) as caught:
        _load(expensive, limits)
    assert caught.value.path == f"{PATH}.yaql"
    assert "raise it with CONVERGE_MAX_EVALUATION_ITEMS" in str(caught.value)
    assert evaluate(expensive) == 60 * sum(range(1, 61))

    budget = Budget(TemplateLimits(max_evaluation_bytes=64 * 1024, yaql_memory_quota=1_000_000))
    with pytest.raises(BudgetExceeded, match="bytes"):
        load_stack(_template(yaql("$.data * 100", "x" * 1000)), types=TYPES, identity=IDENTITY, budget=budget)
    budget = Budget()
    load_stack(_template(yaql("$.data * 100", "abcd")), types=TYPES, identity=IDENTITY, budget=budget)
    assert budget.limits.max_evaluation_bytes - budget.bytes_left >= 400


def test_yaql_needs_heat_template_version_2016_10_14() -> None:
    message = load_error(yaql("1"), version="2016-04-08")
    assert "function 'yaql' needs heat_template_version 2016-10-14 or later" in message


CONDITION_TEMPLATE: dict[str, Any] = {
    "parameters": {"ServiceNames": {"type": "comma_delimited_list", "default": ["neutron", "heat"]}},
    "conditions": {
        "has_neutron": {
            "yaql": {
                "expression": '$.data.service_names.contains("neutron")',
                "data": {"service_names": {"get_param": "ServiceNames"}},
            }
        },
        "ip_not_set": {"equals": [{"yaql": {"expression": "$.data.ips.len()", "data": {"ips": []}}}, 0]},
    },
    "outputs": {
        "neutron": {"value": {"if": ["has_neutron", "yes", "no"]}},
        "no_ip": {"value": {"if": ["ip_not_set", "yes", "no"]}},
    },
}


@pytest.mark.parametrize(("services", "expected"), [(None, "yes"), ("nova_network,heat", "no")])
def test_yaql_is_a_condition_function_from_pike(services: str | None, expected: str) -> None:
    template = {"heat_template_version": "2017-09-01", "resources": {}, **CONDITION_TEMPLATE}
    parameters = {"ServiceNames": services} if services else {}
    stack = load_stack(template, parameters=parameters, types=TYPES, identity=IDENTITY)
    assert stack.conditions["has_neutron"] is (expected == "yes")
    outputs = resolve_outputs(stack, {})
    assert outputs["neutron"].value == expected
    assert outputs["no_ip"].value == "yes"  # TripleO's `equals: [{yaql: ...}, 0]`


def test_yaql_is_not_a_condition_function_before_pike() -> None:
    template = {"heat_template_version": "2016-10-14", "resources": {}, **CONDITION_TEMPLATE}
    with pytest.raises(TemplateInvalid) as caught:
        load_stack(template, types=TYPES, identity=IDENTITY)
    assert "conditions.has_neutron.yaql: function 'yaql' is not allowed in a condition" in str(caught.value)


def test_a_yaql_condition_must_give_a_boolean_and_a_bad_one_names_its_path() -> None:
    template = {
        "heat_template_version": "2017-09-01",
        "resources": {},
        "conditions": {"not_bool": {"yaql": {"expression": "$.data", "data": 3}}, "bad": {"yaql": "x"}},
    }
    with pytest.raises(TemplateInvalid) as caught:
        load_stack(template, types=TYPES, identity=IDENTITY)
    messages = sorted(str(e) for e in caught.value.errors)
    assert messages[0].startswith("conditions.bad.yaql: yaql: arguments must be a map")
    assert messages[1].startswith("conditions.not_bool: a condition must be true/false")
