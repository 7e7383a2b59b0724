"""A document is checked storable and encoded for its template row by one encoding
(`storable.storable_json`, `goals.encoded_document`): the text is the compact JSON the
row stores, what cannot be stored is refused naming its place, and an update's or a
create's template is encoded once in the template pool.

Real: the template layer and `goals.prepare_update` in this process, as the pool runs it.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from services.engine.goals import GoalSpec, prepare_update
from services.engine.storable import storable_json
from services.engine.template import DEFAULT_LIMITS, StackIdentity
from shared.errors import InvalidInput
from shared.plugins.registry import load_types


def test_the_text_that_checked_a_document_is_its_compact_json() -> None:
    document = {"é": ["ünïcode", 2**70, 1.5, None, True], "looks": "a \\u0000 that is text", "k": {}}
    text = storable_json(document, "template")
    assert text == json.dumps(document, ensure_ascii=False, separators=(",", ":"))
    assert json.loads(text) == document


@pytest.mark.parametrize(
    ("document", "place", "reason"),
    [
        ({"a": {"b": "x\x00y"}}, "template.a.b", "NUL characters"),
        ({"a": [1, float("nan")]}, "template.a[1]", "finite"),
        ({"a": "\ud800"}, "template.a", "unpaired surrogates"),
    ],
)
def test_what_a_column_cannot_hold_is_refused_naming_its_place(
    document: dict[str, Any], place: str, reason: str
) -> None:
    with pytest.raises(InvalidInput) as refused:
        storable_json(document, "template")
    assert refused.value.path == place
    assert reason in str(refused.value)


def test_an_updates_template_is_encoded_once_and_stored_as_that_text(monkeypatch: pytest.MonkeyPatch) -> None:
    template = {
        "heat_template_version": "2018-08-31",
        "resources": {
            f"r{i}": {"type": "OS::Heat::TestResource", "properties": {"value": "ü"}} for i in range(3)
        },
    }
    encoded: list[Any] = []
    dumps = json.dumps

    def counted(value: Any, *args: Any, **kwargs: Any) -> str:
        if isinstance(value, dict) and "resources" in value:
            encoded.append(value)
        return dumps(value, *args, **kwargs)

    monkeypatch.setattr(json, "dumps", counted)
    identity = StackIdentity("s", str(uuid.UUID(int=1)), "p")
    prepared = prepare_update(GoalSpec(template), identity, dict(load_types()), DEFAULT_LIMITS)
    assert len(encoded) == 1
    assert json.loads(prepared.goal.template) == template
