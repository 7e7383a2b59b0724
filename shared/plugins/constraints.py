"""Custom constraint plugins: what a `custom_constraint: <name>` in a template runs.

Where it sits: the engine calls `load_constraints()` once at start-up, beside
`registry.load_types()`, and passes the validators down to the template layer
(`services.engine.template.custom_constraints`), which runs them on parameter
values at create, update and validate. Built-ins (`ip_addr`, `net_cidr`, ...,
`shared.plugins.builtin.constraints`) register through the same
`converge.constraints` entry-point group as third-party ones:
`"<constraint name>" = "package.module:function"`.

A validator is a plain function `(value, context) -> str | None`: None when the
value is acceptable, else the reason it is not (Heat's wording where Heat has
one, e.g. "Invalid IP address"). It must be pure and quick: it runs in the
engine's template pool, off the event loop but inside a request, with no I/O
(no HTTP, no database); `context` carries what it may depend on besides the
value (the current time). A plugin whose check would need to ask a service
does not register a validator: the name stays "known but unchecked" (Heat's
names of OpenStack services are, see the engine's table). The value is the
parameter's value after type coercion (a string for `string` parameters);
each item of a `comma_delimited_list` is checked on its own.

A constraint that cannot be imported, is not callable (or cannot be pickled:
the engine sends validators to its template workers), has a malformed name,
or claims a name another package already took stops the engine with a
`PluginLoadError` naming the entry point.
"""

from __future__ import annotations

import pickle
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from importlib.metadata import EntryPoint, entry_points
from typing import Any, Protocol

from shared.plugins.registry import PluginLoadError

CONSTRAINT_GROUP = "converge.constraints"
#: What a constraint name may look like (Heat's are e.g. `nova.flavor`, `ip_addr`, `neutron.lbaas.pool`).
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}")


@dataclass(frozen=True)
class ConstraintContext:
    """What a validator may depend on besides the value."""

    now: datetime  # timezone-aware, UTC


class Validator(Protocol):
    def __call__(self, value: Any, context: ConstraintContext, /) -> str | None: ...


def load_constraint(entry_point: EntryPoint) -> Validator:
    """Import one entry point and check it is a usable validator."""
    if _NAME.fullmatch(entry_point.name) is None:
        raise PluginLoadError(
            entry_point,
            "a constraint name is 1-100 letters, digits, '_', '.', ':' or '-', "
            "starting with a letter or digit",
            group=CONSTRAINT_GROUP,
        )
    try:
        loaded = entry_point.load()
    except (ImportError, AttributeError, SyntaxError) as exc:
        raise PluginLoadError(entry_point, f"cannot import: {exc}", group=CONSTRAINT_GROUP) from exc
    if not callable(loaded) or isinstance(loaded, type):
        raise PluginLoadError(
            entry_point,
            f"{loaded!r} is not a validator function (value, context) -> str | None",
            group=CONSTRAINT_GROUP,
        )
    try:
        pickle.dumps(loaded)
    except (pickle.PicklingError, TypeError, AttributeError) as exc:
        raise PluginLoadError(
            entry_point,
            f"cannot be sent to the engine's template workers (it must pickle, e.g. a module-level "
            f"function): {exc}",
            group=CONSTRAINT_GROUP,
        ) from exc
    validator: Validator = loaded
    return validator


def load_constraints(found: Iterable[EntryPoint] | None = None) -> Mapping[str, Validator]:
    """Every registered validator by constraint name. `found` overrides discovery (tests)."""
    points = found if found is not None else entry_points(group=CONSTRAINT_GROUP)
    validators: dict[str, Validator] = {}
    claimed_by: dict[str, EntryPoint] = {}
    for point in points:
        validator = load_constraint(point)
        earlier = claimed_by.get(point.name)
        if earlier is not None and validators[point.name] is not validator:
            raise PluginLoadError(
                point,
                f"duplicate constraint name; already registered by {earlier.value!r}",
                group=CONSTRAINT_GROUP,
            )
        validators[point.name] = validator
        claimed_by[point.name] = point
    return validators
