"""List and string functions give Heat's results in linear time, and patterns run on RE2.

Real: the function implementations and the template layer. Heat's own
algorithms (quadratic, and a recursive split for str_replace) are written out
here as the reference the results are compared with, on many generated inputs.
Linear time is shown by counting comparisons, not by timing; the ReDoS
pattern would not finish on a backtracking engine within the test's timeout.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from services.engine.template import Budget, TemplateInvalid, load_stack, strings
from services.engine.template import intrinsics as fn
from services.engine.template.versions import TemplateVersion, lookup

from .helpers import IDENTITY, TYPES

_FOUND = lookup("2021-04-16")
assert _FOUND is not None
VERSION: TemplateVersion = _FOUND


def heat_concat_unique(lists: list[list[Any]]) -> list[Any]:
    out: list[Any] = []
    for item in [i for lst in lists for i in lst]:
        if item not in out:
            out.append(item)
    return out


def heat_filter(values: list[Any], sequence: list[Any]) -> list[Any]:
    return [i for i in sequence if i not in values]


def heat_replace(template: str, mapping: dict[str, str]) -> str:
    def replace(texts: list[str], keys: list[str]) -> list[str]:
        if not keys:
            return texts
        key, rest = keys[0], keys[1:]
        return [mapping[key].join(replace(t.split(key), rest)) for t in texts]

    return replace([template], sorted(sorted(mapping), key=len, reverse=True))[0]


def _value(rnd: random.Random, depth: int = 0) -> Any:
    choice = rnd.randrange(9 if depth < 2 else 6)
    if choice == 0:
        return rnd.choice([0, 1, 2])
    if choice == 1:
        return rnd.choice([0.0, 1.0, 2.5])
    if choice == 2:
        return rnd.choice([True, False])
    if choice == 3:
        return rnd.choice(["a", "b", "1", ""])
    if choice == 4:
        return None
    if choice == 5:
        return rnd.choice(["a", 1])
    if choice == 6:
        return [_value(rnd, depth + 1) for _ in range(rnd.randrange(3))]
    keys = rnd.sample(["x", "y", "z"], rnd.randrange(3))
    return {k: _value(rnd, depth + 1) for k in keys}


def test_list_concat_unique_keeps_the_first_occurrence_like_heat() -> None:
    result = fn.list_concat_unique([["a", "b", "x"], ["b", "c"], ["x", "y", "x"]], VERSION, Budget())
    assert result == ["a", "b", "x", "c", "y"]


def test_list_functions_compare_items_as_heat_does() -> None:
    # 1 == 1.0 == True, and maps compare by content whatever their key order.
    assert fn.list_concat_unique(
        [[1, 1.0, True, "1"], [{"a": 1, "b": 2}, {"b": 2, "a": 1}]], VERSION, Budget()
    ) == [
        1,
        "1",
        {"a": 1, "b": 2},
    ]
    assert fn.filter_([[True, {"k": [1]}], [1, 2, {"k": [1.0]}, {"k": [2]}]], VERSION, Budget()) == [
        2,
        {"k": [2]},
    ]


@pytest.mark.parametrize("seed", range(20))
def test_list_functions_match_heats_results(seed: int) -> None:
    rnd = random.Random(seed)
    for _ in range(50):
        lists = [[_value(rnd) for _ in range(rnd.randrange(6))] for _ in range(rnd.randrange(1, 4))]
        assert fn.list_concat_unique(lists, VERSION, Budget()) == heat_concat_unique(lists)
        values = [_value(rnd) for _ in range(rnd.randrange(1, 4))]
        sequence = [_value(rnd) for _ in range(rnd.randrange(1, 8))]
        assert fn.filter_([values, sequence], VERSION, Budget()) == heat_filter(values, sequence)


class Counted:
    """An item that counts how often it is compared."""

    comparisons = 0

    def __init__(self, key: int) -> None:
        self.key = key

    def __eq__(self, other: object) -> bool:
        Counted.comparisons += 1
        return isinstance(other, Counted) and other.key == self.key

    def __hash__(self) -> int:
        return hash(self.key)


@pytest.mark.parametrize(
    "call",
    [
        lambda items: fn.list_concat_unique([items, items], VERSION, Budget()),
        lambda items: fn.filter_([items[::2], items], VERSION, Budget()),
    ],
    ids=["list_concat_unique", "filter"],
)
def test_list_functions_are_linear(call: Any) -> None:
    # H4: the old list_concat_unique compared every pair (n * n); this compares each item about once.
    n = 20_000
    items = [Counted(i) for i in range(n)]
    Counted.comparisons = 0
    call(items)
    assert Counted.comparisons <= 2 * n


@pytest.mark.parametrize("seed", range(10))
def test_str_replace_matches_heats_result(seed: int) -> None:
    rnd = random.Random(seed)
    for _ in range(500):
        text = "".join(rnd.choice("abc") for _ in range(rnd.randrange(25)))
        mapping = {
            "".join(rnd.choice("abc") for _ in range(rnd.randrange(1, 4))): "".join(
                rnd.choice("XYab") for _ in range(rnd.randrange(4))
            )
            for _ in range(rnd.randrange(6))
        }
        ours = strings.str_replace({"template": text, "params": mapping}, VERSION, Budget())
        assert ours == heat_replace(text, mapping), (text, mapping)


def test_str_replace_strict_names_params_it_did_not_replace() -> None:
    # "bc" only occurs inside the longer "abcd", which is replaced first (as in Heat).
    with pytest.raises(Exception, match="params not found in the template: 'bc'"):
        strings.str_replace_strict(
            {"template": "abcd", "params": {"abcd": "1", "bc": "2"}}, VERSION, Budget()
        )


def test_str_replace_takes_thousands_of_placeholders() -> None:
    params = {f"<{i}>": str(i * 2) for i in range(5000)}
    text = " ".join(params)
    assert strings.str_replace({"template": text, "params": params}, VERSION, Budget()) == " ".join(
        params.values()
    )


# --- allowed_pattern --------------------------------------------------------------------


def _pattern_template(pattern: str) -> dict[str, Any]:
    return {
        "heat_template_version": "2018-08-31",
        "parameters": {"p": {"type": "string", "constraints": [{"allowed_pattern": pattern}]}},
        "resources": {},
    }


def test_a_catastrophic_pattern_runs_in_linear_time() -> None:
    # C2: "(a+)+b" against 28 a's took 10 s on Python's re; 100,000 a's would never end.
    with pytest.raises(TemplateInvalid) as caught:
        load_stack(
            _pattern_template("(a+)+b"), parameters={"p": "a" * 100_000}, types=TYPES, identity=IDENTITY
        )
    (error,) = caught.value.errors
    assert error.path == "parameters.p"
    assert "does not match pattern" in error.message


@pytest.mark.parametrize(
    ("pattern", "reason"),
    [
        ("(a)\\1", "invalid escape sequence"),
        ("(?=a)a", "invalid perl operator"),
        ("(?<!a)b", "invalid perl operator"),
    ],
    ids=["backreference", "lookahead", "lookbehind"],
)
def test_a_pattern_re2_cannot_run_is_refused_where_it_is_written(pattern: str, reason: str) -> None:
    with pytest.raises(TemplateInvalid) as caught:
        load_stack(_pattern_template(pattern), parameters={"p": "a"}, types=TYPES, identity=IDENTITY)
    (error,) = caught.value.errors
    assert error.path == "parameters.p.constraints[0].allowed_pattern"
    assert reason in error.message
    assert "RE2" in error.message


@pytest.mark.parametrize(
    ("pattern", "value", "matches"),
    [
        ("[a-z]+", "abc", True),
        ("[a-z]+", "abc1", False),
        ("a|ab", "ab", True),
        ("b", "ab", False),
        ("", "", True),
    ],
)
def test_a_pattern_must_match_the_whole_value(pattern: str, value: str, matches: bool) -> None:
    template = _pattern_template(pattern)
    if matches:
        load_stack(template, parameters={"p": value}, types=TYPES, identity=IDENTITY)
    else:
        with pytest.raises(TemplateInvalid, match="does not match pattern"):
            load_stack(template, parameters={"p": value}, types=TYPES, identity=IDENTITY)
