"""Goals: from what a request (or a parent resource) gives to a validated stack definition.

Where it sits: every template a user controls is parsed, validated and
evaluated here, by pure functions the engine runs in its template pool
(`template_pool`), never on its event loop: `load_goal` for create, update,
patch and previews (documents as the request sent them, merged over the
stack's current goal where the request keeps it), `validate_goal` for
`POST /validate`, `load_definition` when the engine's definition cache misses,
and `load_child_goal` for a nested resource's child stack. Each makes one
evaluation `Budget` for the whole request, and returns (or raises) only what
pickles: the parsed documents, the `StackDefinition`, `InvalidInput` errors.
`prepare_create` and `prepare_update` are `load_goal` for a create and an update: their
documents come back encoded for the template row (`EncodedGoal`), an update's definition packed.
"""

from __future__ import annotations

import dataclasses
import json
import pickle
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from services.engine.core.child_goals import ChildGoal, child_goal
from services.engine.core.groups import check_group_sizes, group_policy_errors
from services.engine.core.nested_checks import nested_errors
from services.engine.core.nesting import NestedInvalid, ScalingState, is_nested
from services.engine.core.updates import patched_parts
from services.engine.storable import check_storable, storable_json, storable_text
from services.engine.template import (
    Budget,
    StackDefinition,
    StackIdentity,
    Template,
    TemplateLimits,
    UncheckedValue,
    load_stack,
    validate_response,
)
from services.engine.template.custom_constraints import DEFAULT_CONSTRAINTS, CustomConstraints
from services.engine.template.errors import ErrorList, TemplateError
from services.engine.template.loader import DocumentError, load_document
from services.engine.template.stack import TypeTable, build_stack
from services.engine.template.template import template_of_document
from shared.errors import InvalidInput


@dataclass(frozen=True)
class Goal:
    """What the user asked for: a template and its inputs (documents parsed)."""

    template: Mapping[str, Any]
    environment: Mapping[str, Any] = field(default_factory=dict)
    parameters: Mapping[str, Any] = field(default_factory=dict)
    files: Mapping[str, str] = field(default_factory=dict)
    #: The template's text as sent (comments and layout kept), None if it came as an object.
    source: str | None = None


@dataclass(frozen=True)
class EncodedGoal:
    """A goal's documents as JSON text, for its template row (`Tx.insert_encoded_template`).
    A create's and an update's are encoded in the template pool with the rest of the goal
    (`prepare_create`, `prepare_update`), so storing a large template costs the event loop
    no encoding, and the parsed documents never travel back from the pool."""

    template: str
    environment: str
    parameters: str
    files: str
    source: str | None = None

    @classmethod
    def of(cls, goal: Goal, *, template_text: str | None = None) -> EncodedGoal:
        """`template_text`: the template already encoded, when checking it made the text
        (`encoded_document`; 7% of a 10k update's pool job was encoding it twice)."""

        def text(document: Mapping[str, Any]) -> str:  # checked storable when it was parsed
            return json.dumps(document, ensure_ascii=False, separators=(",", ":"))

        template = template_text if template_text is not None else text(goal.template)
        return cls(template, text(goal.environment), text(goal.parameters), text(goal.files), goal.source)


@dataclass(frozen=True)
class GoalSpec:
    """A goal as a request gives it: documents as sent (YAML/JSON text or maps).

    With `base` (the stack's current goal, for PATCH and `existing: true`) an
    omitted template is the current one, and the environment, parameters and
    files given are merged over the current ones as Heat merges them
    (`core.updates`), `clear` naming parameters whose values are forgotten.
    `adopt` is the request's `adopt_stack_data` (its template is used when the
    request has none).
    """

    template: Mapping[str, Any] | str | None
    environment: Mapping[str, Any] | str | None = None
    parameters: Mapping[str, Any] = field(default_factory=dict)
    files: Mapping[str, str] = field(default_factory=dict)
    adopt: Mapping[str, Any] | str | None = None
    base: Goal | None = None
    clear: tuple[str, ...] = ()

    @classmethod
    def of(cls, goal: Goal) -> GoalSpec:
        return cls(goal.template, goal.environment, goal.parameters, goal.files)


@dataclass(frozen=True)
class LoadedGoal:
    goal: Goal
    definition: StackDefinition
    adopt: Mapping[str, str] = field(default_factory=dict)  # resource name -> physical id


class AdoptedResource(BaseModel):
    model_config = ConfigDict(extra="ignore")

    resource_id: str | None = Field(None, max_length=255, description="The physical id to take over.")


class AdoptData(BaseModel):
    """What `adopt_stack_data` must hold: the abandon document of a stack."""

    model_config = ConfigDict(extra="ignore")

    template: dict[str, Any] | None = None
    resources: dict[str, AdoptedResource] = Field(default_factory=dict)

    def physical_ids(self) -> dict[str, str]:
        return {name: r.resource_id for name, r in self.resources.items() if r.resource_id}


def document(
    source: Mapping[str, Any] | str, what: str, limits: TemplateLimits, budget: Budget
) -> dict[str, Any]:
    """A request's document, parsed within `limits` and checked storable."""
    return encoded_document(source, what, limits, budget)[0]


def encoded_document(
    source: Mapping[str, Any] | str, what: str, limits: TemplateLimits, budget: Budget
) -> tuple[dict[str, Any], str]:
    """`document`, and its compact JSON text: the encoding that checked it storable,
    which is what its template row stores (`EncodedGoal`)."""
    if isinstance(source, str) and not storable_text(source):
        raise InvalidInput("NUL characters and unpaired surrogates are not allowed", path=what)
    try:
        parsed = load_document(source, limits=limits, what=what, budget=budget)
    except DocumentError as exc:
        raise InvalidInput(str(exc), path=what) from exc
    return parsed, storable_json(parsed, what)


def _adoption(source: Mapping[str, Any] | str, limits: TemplateLimits, budget: Budget) -> AdoptData:
    data = document(source, "adopt_stack_data", limits, budget)
    try:
        return AdoptData.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(["adopt_stack_data", *(str(p) for p in err["loc"])])
        raise InvalidInput(str(err["msg"]), path=where) from exc


class ParsedGoal(NamedTuple):
    goal: Goal
    adopt: dict[str, str]  # resource name -> physical id to take over
    template_text: str | None  # the template as compact JSON, when the request gave one


def parse_goal(spec: GoalSpec, limits: TemplateLimits, budget: Budget) -> ParsedGoal:
    """The goal's documents parsed (and merged over `spec.base`), and the physical ids to
    adopt; everything the request gave checked storable (`api.requests.StackBody` leaves
    that to here)."""
    check_storable(spec.parameters, "parameters")
    check_storable(spec.files, "files")
    base = spec.base
    adoption = _adoption(spec.adopt, limits, budget) if spec.adopt is not None else None
    source = spec.template if isinstance(spec.template, str) else None
    template: Mapping[str, Any]
    text: str | None = None
    if spec.template is not None:
        template, text = encoded_document(spec.template, "template", limits, budget)
    elif adoption is not None and adoption.template is not None:
        template, text = encoded_document(adoption.template, "template", limits, budget)
    elif base is not None:
        template, source = base.template, base.source
    else:
        raise InvalidInput("a template is required")
    given = spec.environment
    environment = document(given, "environment", limits, budget) if given else {}
    if base is not None:
        declared = template.get("parameters")
        environment, parameters = patched_parts(
            base.environment,
            base.parameters,
            environment,
            spec.parameters,
            cleared=spec.clear,
            declared=declared if isinstance(declared, Mapping) else {},
        )
        return ParsedGoal(
            Goal(template, environment, parameters, {**base.files, **spec.files}, source),
            adoption.physical_ids() if adoption else {},
            text,
        )
    goal = Goal(template, environment, dict(spec.parameters), dict(spec.files), source)
    return ParsedGoal(goal, adoption.physical_ids() if adoption else {}, text)


def load_goal(
    spec: GoalSpec,
    identity: StackIdentity,
    types: TypeTable,
    limits: TemplateLimits,
    constraints: CustomConstraints = DEFAULT_CONSTRAINTS,
) -> LoadedGoal:
    """Parse and validate a stack operation's goal (parameter values checked against
    `constraints`); raise `InvalidInput` (all template errors with their paths, or what
    ran out) before anything changes."""
    return _load_goal(spec, identity, types, limits, constraints)[0]


def _load_goal(
    spec: GoalSpec,
    identity: StackIdentity,
    types: TypeTable,
    limits: TemplateLimits,
    constraints: CustomConstraints,
) -> tuple[LoadedGoal, str | None]:
    """`load_goal`, and the template as compact JSON when the request gave one."""
    budget = Budget(limits)
    goal, adopt, text = parse_goal(spec, limits, budget)
    errors = ErrorList()
    template = _template(goal, limits, errors)
    definition = None
    if template is not None:
        definition = build_stack(
            template,
            environment=dict(goal.environment),
            parameters=dict(goal.parameters),
            files=dict(goal.files),
            types=types,
            identity=identity,
            limits=limits,
            custom_constraints=constraints,
            require_values=True,
            errors=errors,
            budget=budget,
        )
    errors.raise_if_any()
    assert definition is not None
    check_group_sizes(definition)
    return LoadedGoal(goal, definition, adopt), text


@dataclass(frozen=True)
class CreateGoal:
    """A create's goal as its request needs it (`prepare_create`): the definition, the
    physical ids to adopt, and the documents to store, encoded in the pool (the parsed
    documents stay there)."""

    definition: StackDefinition
    adopt: Mapping[str, str]
    goal: EncodedGoal


def prepare_create(
    spec: GoalSpec,
    identity: StackIdentity,
    types: TypeTable,
    limits: TemplateLimits,
    constraints: CustomConstraints = DEFAULT_CONSTRAINTS,
) -> CreateGoal:
    """`load_goal`, for a create: its documents encoded (`CreateGoal`)."""
    loaded, text = _load_goal(spec, identity, types, limits, constraints)
    return CreateGoal(loaded.definition, loaded.adopt, EncodedGoal.of(loaded.goal, template_text=text))


@dataclass(frozen=True)
class UpdateGoal:
    """An update's goal as its request needs it (`prepare_update`): what is checked before
    the stack's traversal moves, the documents to store, encoded, and the definition
    itself packed, so that bringing it back from the pool costs the request nothing; it
    is unpickled when first used, once the request is answered
    (`DefinitionCache.put_packed`)."""

    goal: EncodedGoal
    immutable: Mapping[str, Any]  # the parameters the template marks immutable, with their values
    external: tuple[tuple[str, str], ...]  # (resource, external_id) of the nested resources naming one
    resources: int
    unchecked: tuple[UncheckedValue, ...]
    packed: bytes  # the `StackDefinition`, pickled


def prepare_update(
    spec: GoalSpec,
    identity: StackIdentity,
    types: TypeTable,
    limits: TemplateLimits,
    constraints: CustomConstraints = DEFAULT_CONSTRAINTS,
) -> UpdateGoal:
    """`load_goal`, for an update (or delete): its definition packed (`UpdateGoal`)."""
    loaded, text = _load_goal(spec, identity, types, limits, constraints)
    definition = loaded.definition
    return UpdateGoal(
        goal=EncodedGoal.of(loaded.goal, template_text=text),
        immutable=definition.immutable_values(),
        external=external_refs(definition),
        resources=len(definition.resources),
        unchecked=tuple(definition.unchecked),
        packed=pickle.dumps(definition, protocol=pickle.HIGHEST_PROTOCOL),
    )


def external_refs(definition: StackDefinition) -> tuple[tuple[str, str], ...]:
    """(resource, external_id) of each nested resource that names a stack to adopt."""
    return tuple(
        (name, r.external_id)
        for name, r in sorted(definition.resources.items())
        if r.external_id is not None and is_nested(r.type)
    )


def _template(goal: Goal, limits: TemplateLimits, errors: ErrorList) -> Template | None:
    """The goal's template read from its parsed document (shared, not copied: what
    is sent back from the pool holds the document once)."""
    return template_of_document(dict(goal.template), limits=limits, errors=errors)


def validate_goal(
    spec: GoalSpec,
    project_id: str,
    types: TypeTable,
    limits: TemplateLimits,
    constraints: CustomConstraints = DEFAULT_CONSTRAINTS,
) -> dict[str, Any]:
    """The body of `POST /validate` (Heat's shape)."""
    budget = Budget(limits)
    goal = parse_goal(spec, limits, budget).goal
    errors = ErrorList()
    template = _template(goal, limits, errors)
    errors.raise_if_any()
    assert template is not None
    environment, files = dict(goal.environment), dict(goal.files)

    def children(definition: StackDefinition) -> list[TemplateError]:
        policies = group_policy_errors(definition)
        if policies:
            return policies
        return nested_errors(
            definition,
            environment=environment,
            files=files,
            types=types,
            limits=limits,
            budget=budget,
            constraints=constraints,
        )

    return validate_response(
        template,
        environment=environment,
        parameters=dict(goal.parameters),
        files=files,
        types=types,
        limits=limits,
        custom_constraints=constraints,
        project_id=project_id,
        budget=budget,
        children=children,
    )


def load_definition(
    goal: Goal, identity: StackIdentity, types: TypeTable, limits: TemplateLimits
) -> StackDefinition:
    """A stored goal's definition (it was validated when it was stored: its custom
    constraints are not checked again, so an expired `expiration` or a plugin since
    removed does not make the stack unreadable)."""
    return load_stack(
        dict(goal.template),
        environment=dict(goal.environment),
        parameters=dict(goal.parameters),
        files=dict(goal.files),
        types=types,
        identity=identity,
        limits=limits,
        custom_constraints=None,
    )


def load_child_goal(
    type_name: str,
    properties: Mapping[str, Any],
    *,
    environment: Mapping[str, Any],
    files: Mapping[str, str],
    timeout_mins: int | None,
    members: Mapping[str, str],
    removed: Sequence[str],
    identity: StackIdentity,
    types: TypeTable,
    limits: TemplateLimits,
    resource_name: str | None = None,
    facade: Mapping[str, Any] | None = None,
    constraints: CustomConstraints = DEFAULT_CONSTRAINTS,
    creating: bool = False,
    scaling: ScalingState | None = None,
    failed: Sequence[str] = (),
) -> tuple[ChildGoal, StackDefinition]:
    """A nested resource's child goal (its template parsed) and validated definition.
    `resource_name` and `facade`: see `core.child_goals.child_goal`.
    Raises `NestedInvalid` or another `InvalidInput` naming what is wrong."""
    budget = Budget(limits)
    goal = child_goal(
        type_name,
        properties,
        environment=environment,
        files=files,
        timeout_mins=timeout_mins,
        members=members,
        removed=removed,
        limits=limits,
        budget=budget,
        resource_name=resource_name,
        facade=facade,
        creating=creating,
        scaling=scaling,
        failed=failed,
    )
    try:
        template = load_document(goal.template, limits=limits, what="template", budget=budget)
    except DocumentError as exc:
        raise NestedInvalid(str(exc)) from None
    definition = load_stack(
        template,
        environment=dict(goal.environment),
        parameters=dict(goal.parameters),
        files=dict(goal.files),
        types=types,
        identity=identity,
        limits=limits,
        budget=budget,
        custom_constraints=constraints,
    )
    check_group_sizes(definition)
    return dataclasses.replace(goal, template=template), definition
