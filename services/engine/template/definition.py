"""The loaded stack: what the convergence engine reads from this package.

`stack.load_stack` returns a `StackDefinition`: every enabled resource as a
`ResourceDefinition` (type after registry mapping, compiled property tree,
the set of resources it requires), the outputs, the parameter values and
condition results, plus graph helpers (`requires`, `dependents`, `leaves`).
Everything is immutable; property values are resolved later by `resolve.py`.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from enum import StrEnum
from typing import Any

from services.engine.template.environment import Environment
from services.engine.template.limits import DEFAULT_LIMITS, TemplateLimits
from services.engine.template.template import TemplateHeader


class DeletionPolicy(StrEnum):
    """What deleting the stack (or removing the resource) does to it.

    `Snapshot` is accepted only for types that take snapshots
    (`ResourceType.supports_snapshot`): the resource is snapshotted, then
    deleted. For any other type it is refused at validation: deleting instead
    would lose data the user asked to keep.
    """

    DELETE = "Delete"
    RETAIN = "Retain"
    SNAPSHOT = "Snapshot"


@dataclass(frozen=True)
class StackIdentity:
    """Values of the pseudo parameters OS::stack_name, OS::stack_id, OS::project_id."""

    stack_name: str
    stack_id: str
    project_id: str


@dataclass(frozen=True, slots=True)
class ResourceDefinition:
    """One resource as loaded: slots, and pickled as a tuple of its fields (a 10k-resource
    definition holds a fifth less memory than with a `__dict__` each)."""

    name: str
    type: str  # after resource_registry mapping; a file name for template resources
    template_type: str  # as written in the template
    properties: Any  # compiled: plain values and `Expr` nodes
    metadata: Any
    requires: frozenset[str]  # direct predecessors (implicit refs + depends_on)
    depends_on: tuple[str, ...] = ()  # explicit, enabled only
    deletion_policy: DeletionPolicy = DeletionPolicy.DELETE
    update_policy: Mapping[str, Any] = field(default_factory=dict)
    external_id: str | None = None
    description: str = ""
    nested_template: str | None = None  # key in `files` for template resources
    #: Resources named by get_resource/get_attr in properties or metadata: the
    #: data `resolve_properties` needs (a subset of `requires`).
    references: frozenset[str] = frozenset()

    def __getstate__(self) -> tuple[Any, ...]:
        return _STATE(self)

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        # Python code run per resource while a big stack is unpickled, so the thread
        # unpickling it (the template pool's) lets the event loop's thread run meanwhile.
        for slot, value in zip(_SLOTS, state, strict=True):
            slot.__set__(self, value)


_NAMES = [f.name for f in fields(ResourceDefinition)]
_STATE = operator.attrgetter(*_NAMES)  # a tuple of the fields, at C speed
_SLOTS = tuple(ResourceDefinition.__dict__[name] for name in _NAMES)


@dataclass(frozen=True)
class OutputDefinition:
    name: str
    value: Any  # compiled
    description: str = ""
    enabled: bool = True  # False: its condition is false, value is null
    requires: frozenset[str] = frozenset()


@dataclass(frozen=True)
class UncheckedValue:
    """A parameter whose custom constraint was accepted without checking its value
    (`custom_constraints`): the stack gets an event saying so when it is created or updated."""

    parameter: str
    constraint: str
    reason: str

    def message(self) -> str:
        return (
            f"parameter '{self.parameter}' was not checked against custom constraint "
            f"{self.constraint}: {self.reason}"
        )


@dataclass(frozen=True)
class StackDefinition:
    template: TemplateHeader  # the rest of the template is compiled into what follows
    environment: Environment
    identity: StackIdentity
    parameters: Mapping[str, Any]  # resolved values of the declared parameters
    conditions: Mapping[str, bool]
    resources: Mapping[str, ResourceDefinition]
    outputs: Mapping[str, OutputDefinition]
    disabled: frozenset[str] = frozenset()  # resources removed by conditions
    _dependents: Mapping[str, frozenset[str]] = field(default_factory=dict, repr=False)
    #: The limits it was loaded with; resolving it later gets a budget of the same size.
    limits: TemplateLimits = field(default=DEFAULT_LIMITS, repr=False)
    #: Custom constraints accepted unchecked when it was loaded from a request (a stored
    #: goal reloaded is not checked again, and has none).
    unchecked: tuple[UncheckedValue, ...] = ()

    def requires(self, name: str) -> frozenset[str]:
        """Resources `name` needs before it can be checked (direct predecessors)."""
        return self.resources[name].requires

    def dependents(self, name: str) -> frozenset[str]:
        """Resources that require `name` (reverse edges)."""
        if name not in self.resources:
            raise KeyError(name)
        return self._dependents.get(name, frozenset())

    def leaves(self) -> frozenset[str]:
        """Resources that require nothing: the first to check."""
        return frozenset(n for n, r in self.resources.items() if not r.requires)

    def roots(self) -> frozenset[str]:
        """Resources nothing requires: the last to finish (first to clean up)."""
        return frozenset(n for n in self.resources if not self._dependents.get(n))

    def hidden_parameters(self) -> frozenset[str]:
        return frozenset(n for n, s in self.template.parameters.items() if s.hidden)

    def immutable_values(self) -> dict[str, Any]:
        """The parameters this template marks immutable, with their values."""
        return {n: self.parameters.get(n) for n, s in self.template.parameters.items() if s.immutable}

    def immutable_violations(self, previous: StackDefinition) -> list[str]:
        """Immutable parameters (of this template) whose value differs from `previous`.

        Heat refuses such an update; the caller raises with these names.
        """
        return immutable_changes(self.immutable_values(), previous)


def immutable_changes(immutable: Mapping[str, Any], previous: StackDefinition) -> list[str]:
    """Which of the `immutable` parameters (name -> new value) `previous` gave another value."""
    return sorted(
        name
        for name, value in immutable.items()
        if name in previous.parameters and previous.parameters[name] != value
    )
