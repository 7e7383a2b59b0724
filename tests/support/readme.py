"""The README's code blocks that tests run as written.

A block is marked in README.md by `<!-- name -->` before its fence and
`<!-- /name -->` after it; `commands` gives a shell block's commands without
comments and blank lines, `text` any block as it is.
"""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def text(marker: str) -> str:
    name = re.escape(marker)
    found = re.search(rf"<!-- {name} -->\n```\w*\n(.*?)```\n<!-- /{name} -->", README.read_text(), re.S)
    assert found is not None, f"README.md has the {marker} block"
    return found.group(1)


def commands(marker: str) -> list[str]:
    lines = [line.split(" #")[0].rstrip() for line in text(marker).splitlines()]
    return [line for line in lines if line.strip() and not line.lstrip().startswith("#")]
