"""Proves OS::Heat::None, OS::Heat::Value and OS::Heat::RandomString behave as in Heat; pure."""

from __future__ import annotations

import string

import pytest
from pydantic import ValidationError

from shared.plugins import ObservedState, Outcome, ReplacementNeeded, update_rule
from shared.plugins.builtin.placeholders import (
    AnyProperties,
    NoneResource,
    ValueProperties,
    ValueResource,
)
from shared.plugins.builtin.random_string import RandomString, RandomStringProperties
from tests.unit.plugins.plugin_fakes import CtxFactory


async def test_none_accepts_any_properties_and_any_attribute(make_ctx: CtxFactory) -> None:
    props = AnyProperties.model_validate({"image": "cirros", "flavor": {"ram": 512}})
    result = await NoneResource().create(make_ctx(), props)
    assert result.outcome is Outcome.COMPLETE
    assert "first_address" in NoneResource.attributes
    assert list(NoneResource.attributes) == []


async def test_none_update_never_replaces_and_keeps_its_id(make_ctx: CtxFactory) -> None:
    old = AnyProperties.model_validate({"size": 1})
    new = AnyProperties.model_validate({"size": 2, "name": "x"})
    result = await NoneResource().update(make_ctx(), "pid-1", old, new)
    assert result.physical_id == "pid-1"


async def test_none_ids_are_stable_per_action_and_unique_across_actions(make_ctx: CtxFactory) -> None:
    props = AnyProperties()
    a = await NoneResource().create(make_ctx(idempotency_key="k1"), props)
    a_again = await NoneResource().create(make_ctx(idempotency_key="k1"), props)
    b = await NoneResource().create(make_ctx(idempotency_key="k2"), props)
    assert a.physical_id == a_again.physical_id != b.physical_id


async def test_value_exposes_its_value_as_attribute(make_ctx: CtxFactory) -> None:
    props = ValueProperties(value={"a": [1, 2]})
    result = await ValueResource().create(make_ctx(), props)
    assert result.attributes == {"value": {"a": [1, 2]}}
    assert result.physical_id is not None
    seen = await ValueResource().observe(make_ctx(), result.physical_id, props)
    assert seen.state is ObservedState.READY
    assert seen.attributes == {"value": {"a": [1, 2]}}


async def test_value_updates_in_place(make_ctx: CtxFactory) -> None:
    result = await ValueResource().update(
        make_ctx(), "pid", ValueProperties(value=1), ValueProperties(value=2)
    )
    assert result.physical_id == "pid"
    assert result.attributes == {"value": 2}


@pytest.mark.parametrize(
    ("kind", "given", "expected"),
    [
        ("number", "42", 42),
        ("number", "2.5", 2.5),
        ("boolean", "true", True),
        ("string", 7, "7"),
        ("json", '{"k": 1}', {"k": 1}),
        ("comma_delimited_list", "a, b,c", ["a", "b", "c"]),
    ],
)
def test_value_is_converted_to_its_declared_type(kind: str, given: object, expected: object) -> None:
    assert ValueProperties.model_validate({"value": given, "type": kind}).value == expected


def test_value_of_the_wrong_type_is_rejected() -> None:
    with pytest.raises(ValidationError, match="not a number"):
        ValueProperties.model_validate({"value": "abc", "type": "number"})


def test_value_type_must_be_a_hot_parameter_type() -> None:
    with pytest.raises(ValidationError, match="type"):
        ValueProperties.model_validate({"value": 1, "type": "integer"})


async def test_random_string_default_is_32_letters_and_digits(make_ctx: CtxFactory) -> None:
    result = await RandomString().create(make_ctx(), RandomStringProperties())
    value = result.attributes["value"]
    assert len(value) == 32
    assert set(value) <= set(string.ascii_letters + string.digits)


async def test_redelivered_random_string_create_gives_the_same_string(make_ctx: CtxFactory) -> None:
    props = RandomStringProperties(length=20)
    first = await RandomString().create(make_ctx(idempotency_key="job-9"), props)
    again = await RandomString().create(make_ctx(idempotency_key="job-9"), props)
    other = await RandomString().create(make_ctx(idempotency_key="job-10"), props)
    assert first.attributes == again.attributes
    assert first.physical_id == again.physical_id
    assert first.attributes["value"] != other.attributes["value"]


async def test_random_string_honours_class_and_sequence_minimums(make_ctx: CtxFactory) -> None:
    props = RandomStringProperties.model_validate(
        {
            "length": 12,
            "character_classes": [{"class": "digits", "min": 4}],
            "character_sequences": [{"sequence": "!@", "min": 3}],
        }
    )
    for key in ("a", "b", "c", "d"):
        value = (await RandomString().create(make_ctx(idempotency_key=key), props)).attributes["value"]
        assert len(value) == 12
        assert sum(ch.isdigit() for ch in value) >= 4
        assert sum(ch in "!@" for ch in value) >= 3
        assert set(value) <= set(string.digits + "!@")


def test_random_string_minimums_above_length_are_rejected() -> None:
    with pytest.raises(ValidationError, match="combined character class"):
        RandomStringProperties.model_validate(
            {"length": 3, "character_classes": [{"class": "digits", "min": 4}]}
        )


def test_random_string_deprecated_sequence_cannot_mix_with_classes() -> None:
    with pytest.raises(ValidationError, match="deprecated 'sequence'"):
        RandomStringProperties.model_validate(
            {"sequence": "digits", "character_classes": [{"class": "letters"}]}
        )


async def test_random_string_deprecated_sequence_still_works(make_ctx: CtxFactory) -> None:
    props = RandomStringProperties(sequence="octdigits", length=16)
    value = (await RandomString().create(make_ctx(), props)).attributes["value"]
    assert set(value) <= set(string.octdigits)


async def test_random_string_any_property_change_including_salt_replaces(make_ctx: CtxFactory) -> None:
    assert all(
        update_rule(RandomStringProperties, name).value == "replace"
        for name in RandomStringProperties.model_fields
    )
    with pytest.raises(ReplacementNeeded):
        await RandomString().update(
            make_ctx(), "pid", RandomStringProperties(salt="1"), RandomStringProperties(salt="2")
        )


def test_random_string_is_referenced_by_its_value() -> None:
    assert RandomString.reference_attribute == "value"
