"""Hidden parameters: which values are secret and how `Secrets.mask` hides them. Pure."""

from __future__ import annotations

from typing import Any

from services.engine.api.masking import HIDDEN, Secrets

DECLARED: dict[str, Any] = {
    "pw": {"type": "string", "hidden": True, "default": "changeme"},
    "keys": {"type": "comma_delimited_list", "hidden": "yes"},
    "conf": {"type": "json", "hidden": True},
    "pin": {"type": "number", "hidden": True},
    "short": {"type": "string", "hidden": True},
    "name": {"type": "string", "default": "web"},
}


def secrets() -> Secrets:
    return Secrets.of(
        DECLARED,
        given={"pw": "PASSWD-XYZZY", "keys": "key-one,key-two", "name": "visible", "short": "ab"},
        env_parameters={"conf": {"token": "tok-123456", "level": 3}},
        env_defaults={"pin": 987654},
    )


def test_every_value_given_for_a_hidden_parameter_is_secret_and_nothing_else() -> None:
    found = secrets()
    assert found.names == {"pw", "keys", "conf", "pin", "short"}
    assert {"PASSWD-XYZZY", "changeme", "key-one,key-two", "key-one", "key-two"} <= set(found.values)
    assert {"tok-123456", "987654", "ab"} <= set(found.values)
    assert not {"visible", "web"} & set(found.values)


def test_a_value_equal_to_a_secret_is_hidden_and_one_containing_it_has_it_replaced() -> None:
    found = secrets()
    shown = found.mask(
        {
            "name": "PASSWD-XYZZY",
            "url": "http://admin:PASSWD-XYZZY@db/",
            "list": ["key-two", "plain"],
            "pin": 987654,
            "flag": True,
            "nested": {"deep": ["tok-123456"]},
        }
    )
    assert shown == {
        "name": HIDDEN,
        "url": f"http://admin:{HIDDEN}@db/",
        "list": [HIDDEN, "plain"],
        "pin": HIDDEN,
        "flag": True,
        "nested": {"deep": [HIDDEN]},
    }


def test_a_short_secret_is_masked_only_where_it_is_the_whole_value() -> None:
    found = secrets()
    assert found.mask("ab") == HIDDEN
    assert found.mask("Resource CREATE failed: abc") == "Resource CREATE failed: abc"


def test_parameters_are_masked_by_name() -> None:
    assert secrets().parameters({"pw": "x", "name": "web"}) == {"pw": HIDDEN, "name": "web"}


def test_malformed_stored_input_masks_nothing_rather_than_failing() -> None:
    assert Secrets.of(None).mask("anything") == "anything"
    assert Secrets.of({"p": "not a map"}, given=["not", "a", "map"]).values == ()
    assert Secrets.of({"p": {"hidden": True}}, given={"p": None}).values == ()


def test_secrets_of_several_templates_combine() -> None:
    both = Secrets.of({"a": {"hidden": True}}, given={"a": "first-secret"}) | Secrets.of(
        {"b": {"hidden": True}}, given={"b": "second-secret"}
    )
    assert both.mask("first-secret and second-secret") == f"{HIDDEN} and {HIDDEN}"
