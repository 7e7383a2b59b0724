"""What the README, docs/*.md and the code's docstrings name exists.

Real: the repository's files as they are. README.md, every page of docs/ and
every docstring (module, class, function) under services/, shared/, tests/,
bench/ and deploy/ are read, and what they name must be there:

- a repository path (`services/engine/convergence/checks.py`, `tests/support/`): the file
  or folder exists. A path without its extension names a file that has one
  (`examples/web-tier`), `<...>` and `{...}` are placeholders, and
  `path.py:name` names something in that module;
- a dotted name from the top (`shared.protocol.result_id`): it imports;
- in a docstring of services/ or shared/, a back-ticked dotted name whose
  first part is a module beside the docstring's or in a package above it
  (`api.requests.read_json` in services/engine/storable.py): it resolves;
- a `CONVERGE_*` variable: a setting (shared/settings.py) or one the code
  reads (named in code, not only in prose); a name ending in `_` names a family.

And no docstring of services/ or shared/ promises its missing part to a later
issue. What looks like a name but is not one is listed in `NOT_NAMES`, each
with the reason.
"""

from __future__ import annotations

import ast
import functools
import importlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from pydantic_settings import BaseSettings

from shared import settings

ROOT = Path(__file__).resolve().parents[2]
CODE = ("services", "shared", "tests", "bench", "deploy")

NOT_NAMES = {
    "notifications.sandbox": "a queue's name (shared/notifications.py), not a module's",
    **{
        f"sandbox.{kind}": "a custom constraint's name (`custom_constraint: sandbox.…`), not a module's"
        for kind in ("network", "subnet", "server", "volume", "thing", "flavor")
    },
}

PATH = re.compile(
    r"(?<![\w/.<{-])((?:services|shared|tests|bench|deploy|docs|examples)/(?:[\w/.*{}-]|<[^>\n]*>)*)"
    r"(?::([A-Za-z_][\w.]*))?"
)
DOTTED = re.compile(r"(?<![\w./-])((?:services|shared|tests|bench)(?:\.[A-Za-z_]\w*)+)")
TICKED = re.compile(r"`([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)(?:\(\))?`")
VARIABLE = re.compile(r"\bCONVERGE_[A-Z0-9_]+")
PROMISE = re.compile(r"later issue|its own issue|a future issue", re.IGNORECASE)


@dataclass(frozen=True)
class Text:
    where: str  # the file, relative to the repository
    body: str
    package: str | None = None  # the dotted package of a docstring in services/ or shared/


@functools.cache
def texts() -> tuple[Text, ...]:
    return tuple(_texts())


def _texts() -> Iterator[Text]:
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        yield Text(str(page.relative_to(ROOT)), page.read_text())
    for path in python_files():
        module = syntax(path)
        body = "\n".join(filter(None, (ast.get_docstring(node) for node in documented(module))))
        relative = path.relative_to(ROOT)
        package = ".".join(relative.parent.parts) if relative.parts[0] in ("services", "shared") else None
        yield Text(str(relative), body, package)


@functools.cache
def python_files() -> tuple[Path, ...]:
    return tuple(sorted(p for top in CODE for p in (ROOT / top).rglob("*.py") if ".venv" not in p.parts))


@functools.cache
def syntax(path: Path) -> ast.Module:
    return ast.parse(path.read_text())


Documented = ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef


def documented(module: ast.Module) -> Iterator[Documented]:
    yield module
    for node in ast.walk(module):
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            yield node


def resolves(dotted: str) -> bool:
    """Whether `dotted` is a module, or an attribute (path) of the longest module it starts with."""
    parts = dotted.split(".")
    for split in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:split]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[split:]:
            if not hasattr(found, attribute):
                return False
            found = getattr(found, attribute)
        return True
    return False


def path_exists(path: str, attribute: str | None) -> bool:
    path = re.sub(r"<[^>]*>|\{[^}]*\}", "*", path.rstrip(".-"))
    if attribute is not None:
        module = Path(path).with_suffix("")
        return (ROOT / path).is_file() and resolves(".".join((*module.parts, attribute)))
    if "*" in path:
        return any(ROOT.glob(path))
    return (ROOT / path).exists() or any(ROOT.glob(f"{path}.*"))


def relative_name(name: str, package: str) -> str | None:
    """`name` from the package (of `package` or above it) that has a module or file called as
    its first part: `api.requests.read_json` in services.engine.storable is
    services.engine.api.requests.read_json.
    None when no package has one (then it is not a module's name: `ctx.api_url`)."""
    first = name.split(".")[0]
    parts = package.split(".")
    for depth in range(len(parts), 0, -1):
        folder = ROOT.joinpath(*parts[:depth])
        if (folder / f"{first}.py").is_file() or (folder / first).is_dir():
            return ".".join((*parts[:depth], name))
    return None


def test_every_repository_path_named_exists() -> None:
    missing = [
        f"{text.where}: {m.group(0)}"
        for text in texts()
        for m in PATH.finditer(text.body)
        if m.group(0) not in NOT_NAMES and not path_exists(m.group(1), m.group(2))
    ]
    assert missing == []


def test_every_dotted_name_from_the_top_imports() -> None:
    missing = [
        f"{text.where}: {name}"
        for text in texts()
        for name in DOTTED.findall(text.body)
        if name not in NOT_NAMES and not resolves(name)
    ]
    assert missing == []


def test_every_module_relative_name_in_a_docstring_resolves() -> None:
    missing = []
    for text in texts():
        if text.package is None:
            continue
        for name in TICKED.findall(text.body):
            full = relative_name(name.removesuffix(".py"), text.package)
            if name in NOT_NAMES or full is None:
                continue
            if name.endswith(".py") and not (ROOT / f"{full.replace('.', '/')}.py").is_file():
                missing.append(f"{text.where}: {name} ({full}.py)")
            if not name.endswith(".py") and not resolves(full):
                missing.append(f"{text.where}: {name} ({full})")
    assert missing == []


def setting_variables() -> set[str]:
    classes = [
        value
        for value in vars(settings).values()
        if isinstance(value, type) and issubclass(value, BaseSettings) and value is not BaseSettings
    ]
    return {f"{settings.ENV_PREFIX}{field.upper()}" for cls in classes for field in cls.model_fields}


def variables_in_code() -> set[str]:
    """Every CONVERGE_* in a string of code (not a docstring): variables something reads or sets."""
    found: set[str] = set()
    for path in python_files():
        if path == Path(__file__).resolve():
            continue
        module = syntax(path)
        docstrings = {
            id(node.body[0].value)
            for node in documented(module)
            if ast.get_docstring(node) and isinstance(node.body[0], ast.Expr)
        }
        for node in ast.walk(module):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                found.update(VARIABLE.findall(node.value))
    for other in [ROOT / "Makefile", *(p for p in (ROOT / "deploy").rglob("*") if p.suffix != ".py")]:
        if other.is_file():
            found.update(VARIABLE.findall(other.read_text(errors="replace")))
    return found


def test_every_converge_variable_named_is_a_setting_or_read_by_the_code() -> None:
    known = setting_variables() | variables_in_code()
    missing = [
        f"{text.where}: {name}"
        for text in texts()
        for name in VARIABLE.findall(text.body)
        if not (name in known or (name.endswith("_") and any(k.startswith(name) for k in known)))
    ]
    assert missing == []


def test_no_docstring_leaves_its_missing_part_to_a_later_issue() -> None:
    promises = [
        f"{text.where}: …{text.body[max(0, m.start() - 40) : m.end() + 20]}…"
        for text in texts()
        if text.package is not None
        for m in PROMISE.finditer(text.body)
    ]
    assert promises == []


def test_every_name_allowed_is_still_named_somewhere() -> None:
    everything = "\n".join(text.body for text in texts())
    assert [name for name in NOT_NAMES if f"`{name}`" not in everything and name not in everything] == []
