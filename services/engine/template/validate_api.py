"""The body of `POST /v1/{project_id}/validate`, in Heat's shape.

Called by the API handler (which parses the request and renders JSON). It
validates like `load_stack`, except that parameters need no value, and
returns `Description`, `Parameters` (Type, Description, Label, NoEcho,
Default, Value, constraints as MinLength/MaxLength, MinValue/MaxValue,
Step/Offset, AllowedValues, AllowedPattern, CustomConstraint,
ConstraintDescription, Tags), `ParameterGroups` when the template has them,
and `Environment`; a Converge addition, `Warnings`, lists the custom
constraints accepted unchecked (`custom_constraints`). Invalid templates raise
`TemplateInvalid`; values given (or defaults) are checked by the custom
constraints' validators, and an unknown constraint name is refused. The caller may pass a check of the
child stacks (`core.nested_checks`), whose errors count too.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from services.engine.template.constraints import ConstraintKind, ParamType
from services.engine.template.custom_constraints import DEFAULT_CONSTRAINTS, CustomConstraints
from services.engine.template.definition import StackDefinition, StackIdentity
from services.engine.template.environment import Environment
from services.engine.template.errors import ErrorList, TemplateError
from services.engine.template.limits import DEFAULT_LIMITS, Budget, TemplateLimits
from services.engine.template.parameters import ParameterSchema
from services.engine.template.stack import TypeTable, build_stack
from services.engine.template.template import Template

_API_TYPES = {
    ParamType.STRING: "String",
    ParamType.NUMBER: "Number",
    ParamType.COMMA_DELIMITED_LIST: "CommaDelimitedList",
    ParamType.JSON: "Json",
    ParamType.BOOLEAN: "Boolean",
}
_VALIDATE_IDENTITY = StackIdentity("validate", "None", "None")


def validate_response(
    template: Template | str | bytes | Mapping[str, Any],
    *,
    environment: Environment | str | bytes | Mapping[str, Any] | None = None,
    parameters: Mapping[str, Any] | None = None,
    files: Mapping[str, str] | None = None,
    types: TypeTable,
    limits: TemplateLimits = DEFAULT_LIMITS,
    custom_constraints: CustomConstraints = DEFAULT_CONSTRAINTS,
    project_id: str = "None",
    budget: Budget | None = None,
    children: Callable[[StackDefinition], Sequence[TemplateError]] | None = None,
) -> dict[str, Any]:
    """Validate and describe a template as Heat's validate call does. `children`
    checks the child stacks of a stack that is valid itself (their errors, with paths)."""
    errors = ErrorList()
    stack = build_stack(
        template,
        environment=environment,
        parameters=parameters,
        files=files,
        types=types,
        identity=StackIdentity("validate", "None", project_id),
        limits=limits,
        custom_constraints=custom_constraints,
        require_values=False,
        errors=errors,
        budget=budget,
    )
    if stack is not None and not errors and children is not None:
        for error in children(stack):
            errors.add(error.path, error.message)
    errors.raise_if_any()
    assert stack is not None
    tmpl = stack.template
    given = dict(stack.environment.parameter_defaults)
    user = {**stack.environment.parameters, **(parameters or {})}
    result: dict[str, Any] = {
        "Description": tmpl.description or "No description",
        "Parameters": {
            name: _parameter(schema, given.get(name), user.get(name))
            for name, schema in tmpl.parameters.items()
        },
    }
    if tmpl.has_parameter_groups:
        result["ParameterGroups"] = [
            {
                k: v
                for k, v in (
                    ("label", g.label),
                    ("description", g.description),
                    ("parameters", list(g.parameters)),
                )
                if v is not None
            }
            for g in tmpl.parameter_groups
        ]
    result["Environment"] = stack.environment.as_dict()
    if stack.unchecked:
        result["Warnings"] = [
            f"parameters.{u.parameter}: custom constraint {u.constraint} is not checked ({u.reason}); "
            "any value is accepted as given"
            for u in stack.unchecked
        ]
    return result


def _parameter(schema: ParameterSchema, env_default: Any, user_value: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "Type": _API_TYPES[schema.type],
        "Description": schema.description or "",
        "NoEcho": "true" if schema.hidden else "false",
        "Label": schema.label or schema.name,
    }
    if env_default is not None:
        out["Default"] = env_default
    elif schema.has_default:
        out["Default"] = schema.default
    if user_value:
        out["Value"] = user_value
    if schema.tags:
        out["Tags"] = list(schema.tags)
    descriptions: list[str] = []
    for c in schema.constraints:
        if c.kind is ConstraintKind.LENGTH:
            if c.min is not None:
                out["MinLength"] = c.min
            if c.max is not None:
                out["MaxLength"] = c.max
        elif c.kind is ConstraintKind.RANGE:
            if c.min is not None:
                out["MinValue"] = c.min
            if c.max is not None:
                out["MaxValue"] = c.max
        elif c.kind is ConstraintKind.MODULO:
            out["Step"] = c.step
            out["Offset"] = c.offset
        elif c.kind is ConstraintKind.ALLOWED_VALUES:
            out["AllowedValues"] = list(c.allowed)
        elif c.kind is ConstraintKind.ALLOWED_PATTERN:
            out["AllowedPattern"] = c.pattern
        elif c.kind is ConstraintKind.CUSTOM:
            out["CustomConstraint"] = c.name
        if c.description:
            descriptions.append(c.description)
    if descriptions:
        out["ConstraintDescription"] = " ".join(descriptions)
    return out
