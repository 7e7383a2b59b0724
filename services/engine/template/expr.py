"""Compiled function calls: what is left of a template once parameters are known.

The compiler (`compiler.py`) turns each property tree into plain values where
everything is known at load time, and `Expr` nodes where a value depends on
another resource (`get_resource`, `get_attr`, and any function applied to
them). Resolution (`resolve.py`) evaluates the nodes when a resource is
checked, from the `ResourceData` of the resources it depends on, charging
the functions' output to the resolution's evaluation `Budget`.

Nodes pickle (functions by reference), so a stack loaded in a template
worker process reaches the engine whole.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from services.engine.template.errors import BudgetExceeded, FunctionArgError, ResolutionError
from services.engine.template.limits import Budget
from services.engine.template.versions import TemplateVersion


@dataclass(frozen=True)
class ResourceData:
    """What a dependency passed on when it completed.

    `error` is set when the resource failed; outputs that need it then carry
    an error instead of a value (properties never see failed dependencies:
    the engine does not check a resource whose dependency failed).
    """

    reference_id: str | None
    attributes: Mapping[str, Any] = field(default_factory=dict)
    error: str | None = None


DataMap = Mapping[str, ResourceData]


class _Omit:
    """An `if` without a false value whose condition is false: drop the item."""

    def __repr__(self) -> str:
        return "OMIT"

    def __reduce__(self) -> str:
        return "OMIT"  # the one instance, also after pickling


OMIT: Any = _Omit()


class Expr:
    """A value known only when the resources it references are known."""

    __slots__ = ("path",)

    def __init__(self, path: str) -> None:
        self.path = path

    def resolve(self, data: DataMap, budget: Budget) -> Any:
        raise NotImplementedError

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and repr(other) == repr(self)

    def __hash__(self) -> int:
        return hash(repr(self))


def evaluate(value: Any, data: DataMap, budget: Budget) -> Any:
    return value.resolve(data, budget) if isinstance(value, Expr) else value


def _data_for(name: str, data: DataMap, path: str) -> ResourceData:
    found = data.get(name)
    if found is None:
        raise ResolutionError(f"no data for resource {name!r} (not yet complete?)", path=path)
    return found


class GetResource(Expr):
    __slots__ = ("name",)

    def __init__(self, name: str, path: str) -> None:
        super().__init__(path)
        self.name = name

    def resolve(self, data: DataMap, budget: Budget) -> Any:
        return _data_for(self.name, data, self.path).reference_id

    def __repr__(self) -> str:
        return f"{{get_resource: {self.name}}}"


def select_path(value: Any, keys: tuple[str | int, ...]) -> Any:
    """Follow `keys` into an attribute value; None where the path does not exist."""
    for key in keys:
        if isinstance(value, dict):
            value = value.get(key) if isinstance(key, str) else None
        elif isinstance(value, list) and isinstance(key, int) and not isinstance(key, bool):
            value = value[key] if -len(value) <= key < len(value) else None
        else:
            return None
        if value is None:
            return None
    return value


class MemberAttributes(Mapping[str, Any]):
    """The attributes of a resource made of members (a ResourceGroup's). As in Heat,
    `resource.<n>` is member n's reference id, and `resource.<n>.<attribute>` (or
    `resource.<n>` followed by the attribute in the get_attr path) member n's
    attribute; a subclass answers the dotted names."""


class GetAttr(Expr):
    __slots__ = ("attribute", "keys", "resource")

    def __init__(self, resource: str, attribute: str | None, keys: tuple[str | int, ...], path: str) -> None:
        super().__init__(path)
        self.resource = resource
        self.attribute = attribute
        self.keys = keys

    def resolve(self, data: DataMap, budget: Budget) -> Any:
        attributes = _data_for(self.resource, data, self.path).attributes
        if self.attribute is None:
            return dict(attributes)
        keys = self.keys
        if (
            keys
            and isinstance(keys[0], str)
            and isinstance(attributes, MemberAttributes)
            and self.attribute.count(".") == 1
            and self.attribute.startswith("resource.")
        ):  # [group, resource.<n>, <attribute>, ...]: member n's attribute, not its id
            return select_path(attributes.get(f"{self.attribute}.{keys[0]}"), keys[1:])
        return select_path(attributes.get(self.attribute), keys)

    def __repr__(self) -> str:
        parts = [self.resource] + ([self.attribute] if self.attribute else []) + list(map(str, self.keys))
        return f"{{get_attr: [{', '.join(parts)}]}}"


Impl = Callable[[Any, TemplateVersion, Budget], Any]


class Call(Expr):
    """A value function (list_join, str_replace, ...) over partly dynamic args."""

    __slots__ = ("args", "impl", "name", "version")

    def __init__(self, name: str, impl: Impl, args: Any, version: TemplateVersion, path: str) -> None:
        super().__init__(path)
        self.name = name
        self.impl = impl
        self.args = args
        self.version = version

    def resolve(self, data: DataMap, budget: Budget) -> Any:
        args = evaluate(self.args, data, budget)
        try:
            return self.impl(args, self.version, budget)
        except BudgetExceeded as exc:
            raise exc.located(self.path, self.name) from None
        except FunctionArgError as exc:
            raise ResolutionError(f"{self.name}: {exc}", path=self.path) from None
        except RecursionError:
            raise ResolutionError(f"{self.name}: value nested too deeply", path=self.path) from None

    def __repr__(self) -> str:
        return f"{{{self.name}: {self.args!r}}}"


class ListExpr(Expr):
    __slots__ = ("items",)

    def __init__(self, items: list[Any], path: str) -> None:
        super().__init__(path)
        self.items = items

    def resolve(self, data: DataMap, budget: Budget) -> Any:
        return [evaluate(item, data, budget) for item in self.items]

    def __repr__(self) -> str:
        return repr(self.items)


class DictExpr(Expr):
    __slots__ = ("items",)

    def __init__(self, items: dict[str, Any], path: str) -> None:
        super().__init__(path)
        self.items = items

    def resolve(self, data: DataMap, budget: Budget) -> Any:
        return {key: evaluate(value, data, budget) for key, value in self.items.items()}

    def __repr__(self) -> str:
        return repr(self.items)


class Unknown(Expr):
    """A parameter without a value, during template-only validation."""

    __slots__ = ("name",)

    def __init__(self, name: str, path: str) -> None:
        super().__init__(path)
        self.name = name

    def resolve(self, data: DataMap, budget: Budget) -> Any:
        raise ResolutionError(f"parameter {self.name!r} has no value", path=self.path)

    def __repr__(self) -> str:
        return f"{{get_param: {self.name}}}"


class Invalid(Expr):
    """Where an error was reported: keeps later checks from piling on."""

    __slots__ = ()

    def resolve(self, data: DataMap, budget: Budget) -> Any:
        raise ResolutionError("invalid template snippet", path=self.path)

    def __repr__(self) -> str:
        return "<invalid>"


def calls_any(value: Any, names: frozenset[str]) -> bool:
    """Whether compiled `value` still holds a call of one of the functions `names`."""
    if isinstance(value, Call):
        return value.name in names or calls_any(value.args, names)
    if isinstance(value, ListExpr):
        return any(calls_any(item, names) for item in value.items)
    if isinstance(value, DictExpr):
        return any(calls_any(item, names) for item in value.items.values())
    return False


def copy_json(value: Any, budget: Budget) -> Any:
    """A fresh copy of JSON-like data (compiled trees share static parts, and a
    value referenced many times is copied as many times: each entry and string
    copied is charged to `budget`)."""
    if isinstance(value, dict):
        budget.charge(items=len(value))
        return {k: copy_json(v, budget) for k, v in value.items()}
    if isinstance(value, list):
        budget.charge(items=len(value))
        return [copy_json(v, budget) for v in value]
    if isinstance(value, str):
        budget.charge(chars=len(value))
    return value


def dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=repr)
