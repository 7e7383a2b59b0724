"""Custom constraints for the sandbox cloud: `custom_constraint: sandbox.network`, ...

Registered through the `converge.constraints` entry points beside the Sandbox::*
types (see `shared.plugins.constraints`); the engine runs them on parameter
values in its template pool, where no I/O is allowed.

- `sandbox.flavor` is checked fully: the sandbox's flavors are a fixed list
  (`specs.FLAVORS`).
- `sandbox.network`, `sandbox.subnet`, `sandbox.server`, `sandbox.volume` and
  `sandbox.thing` check the value's form only: a sandbox id (a lower-case UUID,
  as the sandbox makes them), so a name or a typo is refused at create. Whether
  the object exists is not checked here: that needs the sandbox's HTTP API, which
  the engine never calls (only workers talk to clouds); the sandbox itself refuses
  a reference to a missing object when the resource using it is created.
"""

from __future__ import annotations

import uuid
from typing import Any

from services.sandbox.specs import FLAVORS, Kind
from shared.plugins.constraints import ConstraintContext


def _id_problem(value: Any, kind: Kind) -> str | None:
    if isinstance(value, str):
        try:
            if str(uuid.UUID(value)) == value:
                return None
        except ValueError:
            pass
    return f"not a sandbox {kind.value} id (a sandbox id is a lower-case UUID; names are not accepted)"


def network(value: Any, context: ConstraintContext) -> str | None:
    return _id_problem(value, Kind.NETWORK)


def subnet(value: Any, context: ConstraintContext) -> str | None:
    return _id_problem(value, Kind.SUBNET)


def server(value: Any, context: ConstraintContext) -> str | None:
    return _id_problem(value, Kind.SERVER)


def volume(value: Any, context: ConstraintContext) -> str | None:
    return _id_problem(value, Kind.VOLUME)


def thing(value: Any, context: ConstraintContext) -> str | None:
    return _id_problem(value, Kind.THING)


def flavor(value: Any, context: ConstraintContext) -> str | None:
    if value in FLAVORS:
        return None
    return f"not a sandbox flavor (the sandbox has {', '.join(FLAVORS)})"
