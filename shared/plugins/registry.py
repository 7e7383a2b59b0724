"""Finding resource types: the `converge.resources` entry-point group.

Where it sits: every service calls `load_types()` once at start-up and passes
the resulting mapping down (engine: validation, diffing, schemas; worker and
observer: running actions). Built-in types register through the same group in
Converge's own `pyproject.toml`, so third-party plugins are first-class.

Each entry point is `"Type::Name" = "package.module:ClassName"`; the name must
equal the class's `type_name`. A plugin that cannot be imported, is not a
`ResourceType`, disagrees about its name, claims a name another plugin
already took, or declares something `type_schema` cannot describe stops the
service with a `PluginLoadError` naming the entry point and its package.
Import errors of kinds other than ImportError/AttributeError/SyntaxError
raised by a plugin's own module code propagate unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable
from importlib.metadata import EntryPoint, entry_points

from shared.errors import PermanentError
from shared.plugins.base import Properties, ResourceType
from shared.plugins.schema import type_schema

ENTRY_POINT_GROUP = "converge.resources"

__all__ = ["ENTRY_POINT_GROUP", "PluginLoadError", "load_type", "load_types", "type_schema"]


class PluginLoadError(PermanentError):
    """A resource plugin is broken; the message names the entry point."""

    def __init__(self, entry_point: EntryPoint, problem: str, *, group: str = ENTRY_POINT_GROUP) -> None:
        what = "resource" if group == ENTRY_POINT_GROUP else "constraint"
        super().__init__(
            f"{what} plugin {entry_point.name!r} = {entry_point.value!r}"
            f"{_origin(entry_point)} in group {group!r}: {problem}"
        )
        self.entry_point = entry_point


def _origin(entry_point: EntryPoint) -> str:
    dist = entry_point.dist
    return f" (package {dist.name} {dist.version})" if dist is not None else ""


def load_type(entry_point: EntryPoint) -> type[ResourceType]:
    """Import one entry point and check it is a well-formed resource type."""
    try:
        loaded = entry_point.load()
    except (ImportError, AttributeError, SyntaxError) as exc:
        raise PluginLoadError(entry_point, f"cannot import: {exc}") from exc
    if not (isinstance(loaded, type) and issubclass(loaded, ResourceType)):
        raise PluginLoadError(entry_point, f"{loaded!r} is not a ResourceType subclass")
    if loaded is ResourceType:
        raise PluginLoadError(entry_point, "points at the ResourceType base class itself")
    declared = getattr(loaded, "type_name", None)
    if declared != entry_point.name:
        raise PluginLoadError(
            entry_point,
            f"class {loaded.__qualname__} declares type_name {declared!r}; "
            f"the entry point name must equal it",
        )
    if not (isinstance(loaded.properties, type) and issubclass(loaded.properties, Properties)):
        raise PluginLoadError(entry_point, "`properties` is not a Properties subclass")
    try:
        type_schema(loaded)
    except (TypeError, ValueError, AttributeError) as exc:
        raise PluginLoadError(entry_point, f"declarations cannot be described: {exc}") from exc
    return loaded


def load_types(
    found: Iterable[EntryPoint] | None = None,
) -> dict[str, type[ResourceType]]:
    """Every registered resource type by name. `found` overrides discovery (tests)."""
    points = found if found is not None else entry_points(group=ENTRY_POINT_GROUP)
    types: dict[str, type[ResourceType]] = {}
    claimed_by: dict[str, EntryPoint] = {}
    for point in points:
        cls = load_type(point)
        earlier = claimed_by.get(point.name)
        if earlier is not None and types[point.name] is not cls:
            raise PluginLoadError(
                point,
                f"duplicate type name; already registered by {earlier.value!r}{_origin(earlier)}",
            )
        types[point.name] = cls
        claimed_by[point.name] = point
    return types
