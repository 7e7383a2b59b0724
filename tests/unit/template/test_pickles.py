"""What the template pool sends between processes survives pickling unchanged.

Real: the template layer, `goals.load_goal` and the error types; pickle round
trips in this process stand in for the pool's pipe (the pool itself is
exercised with real processes in tests/integration/test_template_pool.py).
"""

from __future__ import annotations

import json
import pickle

from services.engine.goals import GoalSpec, load_goal
from services.engine.template import (
    DEFAULT_LIMITS,
    BudgetExceeded,
    ResourceData,
    TemplateInvalid,
    resolve_properties,
)
from services.engine.template.conditions import NO_VALUE
from services.engine.template.errors import TemplateError
from services.engine.template.expr import OMIT
from shared.errors import InvalidInput

from .helpers import IDENTITY, TYPES


def round_trip(value: object) -> object:
    return pickle.loads(pickle.dumps(value))


def test_markers_stay_the_one_instance() -> None:
    assert round_trip(OMIT) is OMIT
    assert round_trip(NO_VALUE) is NO_VALUE


def test_errors_keep_their_type_message_and_details() -> None:
    invalid = round_trip(InvalidInput("bad", path="resources.a"))
    assert isinstance(invalid, InvalidInput)
    assert (str(invalid), invalid.path, invalid.reason) == ("resources.a: bad", "resources.a", "bad")
    errors = (TemplateError("resources.a.type", "unknown"), TemplateError("outputs.o", "bad"))
    many = round_trip(TemplateInvalid(errors))
    assert isinstance(many, TemplateInvalid)
    assert many.errors == errors
    assert str(many) == str(TemplateInvalid(errors))
    over = round_trip(BudgetExceeded("would produce 9 items").located("resources.v.properties", "repeat"))
    assert isinstance(over, BudgetExceeded)
    assert over.path == "resources.v.properties"


def test_a_loaded_stack_resolves_the_same_after_the_trip() -> None:
    template = {
        "heat_template_version": "2021-04-16",
        "conditions": {"no": False},
        "resources": {
            "dep": {"type": "OS::Heat::TestResource"},
            "v": {
                "type": "OS::Heat::Value",
                "properties": {
                    "value": {
                        "joined": {
                            "str_replace_strict": {
                                "template": "a-X",
                                "params": {"X": {"get_attr": ["dep", "output"]}},
                            }
                        },
                        "gone": {"if": ["no", 1]},
                    }
                },
            },
        },
    }
    loaded = load_goal(GoalSpec(template), IDENTITY, TYPES, DEFAULT_LIMITS)
    copy = pickle.loads(pickle.dumps(loaded))
    data = {"dep": ResourceData("dep-id", {"output": "out"})}
    assert copy.goal == loaded.goal
    assert resolve_properties(copy.definition, "v", data) == {"value": {"joined": "a-out"}}
    assert resolve_properties(copy.definition, "v", data) == resolve_properties(loaded.definition, "v", data)


def test_a_definition_pickles_its_template_header_not_its_snippets_again() -> None:
    """The resources, outputs and conditions are compiled into the definition; their
    raw snippets are not carried too (at 10k resources they were a quarter of what the
    pool pickled), while what is read of the template afterwards still is."""
    template = {
        "heat_template_version": "2021-04-16",
        "description": "kept",
        "parameters": {"p": {"type": "string", "default": "x", "hidden": True}},
        "conditions": {"on": True},
        "resources": {"only_here_as_a_snippet": {"type": "OS::Heat::TestResource"}},
        "outputs": {"o": {"value": {"get_resource": "only_here_as_a_snippet"}}},
    }
    definition = load_goal(GoalSpec(template), IDENTITY, TYPES, DEFAULT_LIMITS).definition
    packed = pickle.dumps(definition)
    assert b"ResourceSnippet" not in packed
    assert b"OutputSnippet" not in packed
    copy = pickle.loads(packed)
    assert copy.template.description == "kept"
    assert copy.hidden_parameters() == frozenset({"p"})
    assert copy.resources == definition.resources
    assert set(copy.outputs) == {"o"}


def test_a_name_the_template_repeats_is_one_string_in_the_definition_and_its_pickle() -> None:
    """A JSON body decodes every occurrence of a name as its own string; the loaded
    definition holds one (a 10k-resource definition was an eighth smaller for it)."""
    text = json.dumps(
        {
            "heat_template_version": "2021-04-16",
            "resources": {
                "a": {"type": "OS::Heat::TestResource"},
                "b": {
                    "type": "OS::Heat::TestResource",
                    "properties": {"value": {"get_attr": ["a", "output"]}},
                    "depends_on": ["a"],
                },
            },
        }
    )
    definition = load_goal(GoalSpec(json.loads(text)), IDENTITY, TYPES, DEFAULT_LIMITS).definition
    for loaded in (definition, pickle.loads(pickle.dumps(definition))):
        a, b = loaded.resources["a"], loaded.resources["b"]
        (required,) = b.requires
        assert required is a.name
        assert b.depends_on[0] is a.name
        assert b.type is a.type
