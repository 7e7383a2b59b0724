"""custom_constraint on parameters: Heat's service names accepted unchecked (listed as
such), validators run on the value wherever it comes from, unknown names refused, and a
stored goal never checked again.

Real: the template layer (load_stack, validate_response, goals) with the declaration-only
test types and the registry built from Converge's own validators plus a fake plugin one.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from services.engine.goals import Goal, load_definition
from services.engine.template import (
    DEFAULT_CONSTRAINTS,
    DEFAULT_LIMITS,
    TemplateInvalid,
    constraint_registry,
    load_stack,
    validate_response,
)
from services.engine.template.custom_constraints import HEAT_SERVICE_CONSTRAINTS
from shared.plugins.builtin.constraints import BUILTIN_VALIDATORS
from shared.plugins.constraints import ConstraintContext

from .helpers import IDENTITY, TYPES

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)


def _template(parameters: dict[str, Any]) -> dict[str, Any]:
    return {
        "heat_template_version": "2018-08-31",
        "parameters": parameters,
        "resources": {"r": {"type": "OS::Heat::None"}},
    }


def _custom(name: str, ptype: str = "string", **more: Any) -> dict[str, Any]:
    return {"type": ptype, "constraints": [{"custom_constraint": name}], **more}


def _errors(template: dict[str, Any], **kwargs: Any) -> list[str]:
    with pytest.raises(TemplateInvalid) as caught:
        load_stack(template, types=TYPES, identity=IDENTITY, now=NOW, **kwargs)
    return [str(e) for e in caught.value.errors]


def test_heats_service_names_are_accepted_unchecked_and_said_so() -> None:
    template = _template(
        {
            "key_name": _custom("nova.keypair"),
            "image": _custom("glance.image"),
            "flavor": _custom("nova.flavor", default="m1.small"),
        }
    )
    stack = load_stack(
        template, types=TYPES, identity=IDENTITY, parameters={"key_name": "k", "image": "cirros"}
    )
    assert stack.parameters == {"key_name": "k", "image": "cirros", "flavor": "m1.small"}
    assert [u.message() for u in stack.unchecked] == [
        "parameter 'key_name' was not checked against custom constraint nova.keypair: Converge does not "
        "check values against the Compute service (nova)",
        "parameter 'image' was not checked against custom constraint glance.image: Converge does not "
        "check values against the Image service (glance)",
        "parameter 'flavor' was not checked against custom constraint nova.flavor: Converge does not "
        "check values against the Compute service (nova)",
    ]


def test_every_heat_service_name_is_known() -> None:
    for name in ("nova.flavor", "neutron.network", "neutron.port", "cinder.vtype", "keystone.project"):
        assert name in HEAT_SERVICE_CONSTRAINTS
        assert name in DEFAULT_CONSTRAINTS.unchecked
    assert set(BUILTIN_VALIDATORS) <= set(DEFAULT_CONSTRAINTS.validators)


def test_a_bad_value_is_refused_naming_parameter_value_and_constraint() -> None:
    template = _template({"addr": _custom("ip_addr")})
    assert _errors(template, parameters={"addr": "10.0.0.300"}) == [
        "parameters.addr: Error validating value '10.0.0.300': Invalid IP address (custom_constraint ip_addr)"
    ]


def test_the_value_is_checked_where_it_comes_from() -> None:
    template = _template({"addr": _custom("ip_addr", default="nope")})
    assert _errors(template) == [
        "parameters.addr: Error validating value 'nope': Invalid IP address (custom_constraint ip_addr)"
    ]
    env = {"parameter_defaults": {"addr": "also-not"}}
    assert _errors(template, environment=env)[0].startswith("environment.parameter_defaults.addr: ")
    env = {"parameters": {"addr": "x"}}
    assert _errors(template, environment=env)[0].startswith("environment.parameters.addr: ")
    ok = load_stack(template, types=TYPES, identity=IDENTITY, parameters={"addr": "::1"})
    assert ok.parameters == {"addr": "::1"}
    assert ok.unchecked == ()


def test_each_item_of_a_list_is_checked() -> None:
    template = _template({"dns": _custom("ip_addr", "comma_delimited_list")})
    stack = load_stack(template, types=TYPES, identity=IDENTITY, parameters={"dns": "8.8.8.8,1.1.1.1"})
    assert stack.parameters == {"dns": ["8.8.8.8", "1.1.1.1"]}
    assert _errors(template, parameters={"dns": "8.8.8.8,x"}) == [
        "parameters.dns: Error validating value 'x': Invalid IP address (custom_constraint ip_addr)"
    ]


def test_a_hidden_value_is_never_repeated() -> None:
    template = _template({"secret": _custom("ip_addr", hidden=True)})
    assert _errors(template, parameters={"secret": "s3cr3t"}) == [
        "parameters.secret: Error validating value '******' (custom_constraint ip_addr)"
    ]


def test_a_constraint_description_replaces_the_reason() -> None:
    template = _template(
        {
            "addr": {
                "type": "string",
                "constraints": [{"custom_constraint": "ip_addr", "description": "An IP."}],
            }
        }
    )
    assert _errors(template, parameters={"addr": "x"}) == [
        "parameters.addr: An IP. ('x' does not validate ip_addr)"
    ]


def test_a_long_value_is_shortened_in_the_message() -> None:
    template = _template({"addr": _custom("ip_addr")})
    (error,) = _errors(template, parameters={"addr": "x" * 5000})
    assert len(error) < 300
    assert "xxx...'" in error


def test_an_unknown_name_refuses_the_value_at_create_in_heats_shape() -> None:
    template = _template({"flavor": _custom("nova.flavour")})
    assert _errors(template, parameters={"flavor": "m1.small"}) == [
        'parameters.flavor: "m1.small" does not validate nova.flavour (constraint not found); '
        "did you mean nova.flavor, octavia.flavor, trove.flavor?"
    ]


def test_validate_refuses_an_unknown_name_even_without_a_value() -> None:
    template = _template({"flavor": _custom("nova.flavour")})
    with pytest.raises(TemplateInvalid) as caught:
        validate_response(template, types=TYPES)
    assert [str(e) for e in caught.value.errors] == [
        'parameters.flavor.constraints[0].custom_constraint: "nova.flavour" constraint is not supported: '
        "no installed plugin provides it and OpenStack Heat has no such constraint; "
        "did you mean nova.flavor, octavia.flavor, trove.flavor?"
    ]


def test_validate_lists_each_custom_constraint_and_warns_of_unchecked_ones() -> None:
    template = _template({"flavor": _custom("nova.flavor"), "addr": _custom("ip_addr")})
    body = validate_response(template, types=TYPES)
    assert body["Parameters"]["flavor"]["CustomConstraint"] == "nova.flavor"
    assert body["Parameters"]["addr"]["CustomConstraint"] == "ip_addr"
    assert body["Warnings"] == [
        "parameters.flavor: custom constraint nova.flavor is not checked (Converge does not check values "
        "against the Compute service (nova)); any value is accepted as given"
    ]
    with pytest.raises(TemplateInvalid, match=r"parameters.addr: Error validating value 'x'"):
        validate_response(template, types=TYPES, parameters={"addr": "x"})


def test_a_template_without_custom_constraints_has_no_warnings() -> None:
    body = validate_response(_template({"a": {"type": "string"}}), types=TYPES)
    assert "Warnings" not in body


def test_a_plugin_validator_is_used_and_takes_the_place_of_an_unchecked_name() -> None:
    def flavor(value: Any, context: ConstraintContext) -> str | None:
        return None if value.startswith("m1.") else "no such flavor"

    registry = constraint_registry({**BUILTIN_VALIDATORS, "nova.flavor": flavor})
    assert "nova.flavor" not in registry.unchecked
    template = _template({"flavor": _custom("nova.flavor")})
    stack = load_stack(
        template,
        types=TYPES,
        identity=IDENTITY,
        parameters={"flavor": "m1.tiny"},
        custom_constraints=registry,
    )
    assert stack.unchecked == ()
    assert _errors(template, parameters={"flavor": "big"}, custom_constraints=registry) == [
        "parameters.flavor: Error validating value 'big': no such flavor (custom_constraint nova.flavor)"
    ]


def test_expiration_is_judged_at_load_time_and_a_stored_goal_is_not_checked_again() -> None:
    template = _template({"until": _custom("expiration")})
    loaded = load_stack(template, types=TYPES, identity=IDENTITY, parameters={"until": "2027-01-01"}, now=NOW)
    assert loaded.parameters == {"until": "2027-01-01"}
    later = datetime(2028, 1, 1, tzinfo=UTC)
    with pytest.raises(TemplateInvalid, match="Expiration time is out of date"):
        load_stack(template, types=TYPES, identity=IDENTITY, parameters={"until": "2027-01-01"}, now=later)
    typo = _template({"until": _custom("expirashun")})
    stored = load_definition(
        Goal(template=typo, parameters={"until": "whenever"}), IDENTITY, TYPES, DEFAULT_LIMITS
    )
    assert stored.parameters == {"until": "whenever"}
    assert stored.unchecked == ()


def test_a_long_unknown_name_is_shortened_in_the_message() -> None:
    template = _template({"p": _custom("x" * 10_000)})
    (error,) = _errors(template, parameters={"p": "v"})
    assert len(error) < 300
