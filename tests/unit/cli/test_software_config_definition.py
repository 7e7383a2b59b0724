"""`converge software config create --definition-file`: what a definition file may hold."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.cli.client import CliError
from services.cli.commands.software import definition


def test_a_definition_gives_inputs_outputs_and_options(tmp_path: Path) -> None:
    path = tmp_path / "def.yaml"
    path.write_text("inputs:\n- name: x\noutputs:\n- name: y\noptions:\n  a: 1\n")
    assert definition(path) == {"inputs": [{"name": "x"}], "outputs": [{"name": "y"}], "options": {"a": 1}}
    path.write_text("")
    assert definition(path) == {}


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("inputs: []\nconfig: x\n", "unknown keys config"),
        ("- a\n", "a definition is a map"),
        ("inputs: [\n", "is not YAML or JSON"),
    ],
)
def test_a_bad_definition_is_refused_naming_the_file(tmp_path: Path, text: str, said: str) -> None:
    path = tmp_path / "def.yaml"
    path.write_text(text)
    with pytest.raises(CliError, match=said) as refused:
        definition(path)
    assert str(path) in str(refused.value)


def test_a_missing_definition_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(CliError, match="cannot read"):
        definition(tmp_path / "absent.yaml")
