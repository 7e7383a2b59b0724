"""README's configuration table lists every setting there is, and nothing that is not one.

Real: README.md and the settings classes of shared/settings.py, read as they
are; a new field without a row (or a row for a removed one) fails here.
"""

from __future__ import annotations

import re
from pathlib import Path

from pydantic_settings import BaseSettings

from shared import settings

README = Path(__file__).resolve().parents[2] / "README.md"


def documented() -> set[str]:
    """The variables named in the first column of the table under `## Configuration`."""
    text = README.read_text()
    section = text[text.index("## Configuration") :]
    section = section[: section.index("\n## ", 1)]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    return {name for row in rows for name in re.findall(r"`(CONVERGE_\w+)`", row.split("|")[1])}


def settings_classes() -> list[type[BaseSettings]]:
    return [
        value
        for value in vars(settings).values()
        if isinstance(value, type) and issubclass(value, BaseSettings) and value is not BaseSettings
    ]


def variables() -> dict[str, str]:
    """Every setting's variable, and a class that has it."""
    return {
        f"{settings.ENV_PREFIX}{field.upper()}": cls.__name__
        for cls in settings_classes()
        for field in cls.model_fields
    }


def test_every_setting_of_every_service_has_a_row_in_the_readme_table() -> None:
    assert {"EngineSettings", "WorkerSettings", "ObserverSettings", "SandboxSettings", "UpSettings"} <= {
        cls.__name__ for cls in settings_classes()
    }
    missing = {name: cls for name, cls in variables().items() if name not in documented()}
    assert missing == {}, "settings missing from README.md's Configuration table"


def test_the_table_names_no_variable_that_is_not_a_setting() -> None:
    assert documented() - set(variables()) == set()
