"""The compiler: a template snippet -> plain values plus `Expr` nodes, once per load.

Runs inside `stack.load_stack` for every enabled resource's properties and
metadata and every output's value. Parameters, pseudo parameters, get_file
and `if` are evaluated here; value functions whose arguments are all known
are folded to their result (so a bad argument is a validation error naming
its place); `get_resource`/`get_attr` become `Expr` nodes and record the
resource they need, which is how the dependency graph gets its implicit
edges. `resource_facade` gives the parent resource's metadata and policies
(the environment's facade section, set for child stacks; outside one, what a
resource without metadata or policies has). Functions not allowed in the
template's version are errors. Folded
functions charge the load's evaluation `Budget`; running out of it stops the
load at once (`BudgetExceeded`, naming the function and its path).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

from services.engine.template import intrinsics as fn
from services.engine.template import strings as text
from services.engine.template import yaql_function
from services.engine.template.conditions import NO_VALUE, Conditions, ParamScope
from services.engine.template.errors import BudgetExceeded, ErrorList, FunctionArgError, join_path
from services.engine.template.expr import (
    OMIT,
    Call,
    DictExpr,
    Expr,
    GetAttr,
    GetResource,
    Impl,
    Invalid,
    ListExpr,
    Unknown,
)
from services.engine.template.limits import Budget
from services.engine.template.versions import (
    ALL_FUNCTIONS,
    CONDITION_ONLY,
    UNSUPPORTED_FUNCTIONS,
    TemplateVersion,
    first_version_with,
    last_version_with,
)


@dataclass(frozen=True)
class _Spec:
    """How a value function takes its arguments (checked before it can run)."""

    impl: Impl
    usage: str
    shape: type  # list or dict
    min_len: int = 0
    max_len: int | None = None
    dynamic_args: bool = False  # the whole argument may come from a function
    #: Checks what is known of the arguments before they are (e.g. yaql's expression).
    precheck: Callable[[Any, Budget], None] | None = None


_SPECS: dict[str, _Spec] = {
    "list_join": _Spec(text.list_join, "list_join: [<delimiter>, <list>, ...]", list, 2),
    "Fn::Join": _Spec(text.cfn_join, "Fn::Join: [<delimiter>, <list>]", list, 2, 2),
    "str_split": _Spec(text.str_split, "str_split: [<delimiter>, <string>, <index>?]", list, 2, 3),
    "Fn::Split": _Spec(text.cfn_split, "Fn::Split: [<delimiter>, <string>]", list, 2, 2),
    "Fn::Select": _Spec(text.cfn_select, "Fn::Select: [<index>, <list or map>]", list, 2, 2),
    "Fn::Replace": _Spec(text.cfn_replace, "Fn::Replace: [{<key>: <value>}, <template>]", list, 2, 2),
    "Fn::Base64": _Spec(text.cfn_base64, "Fn::Base64: <string>", object),
    "str_replace": _Spec(text.str_replace, "str_replace: {template: <string>, params: <map>}", dict),
    "str_replace_strict": _Spec(
        text.str_replace_strict, "str_replace_strict: {template: <string>, params: <map>}", dict
    ),
    "str_replace_vstrict": _Spec(
        text.str_replace_vstrict, "str_replace_vstrict: {template: <string>, params: <map>}", dict
    ),
    "repeat": _Spec(fn.repeat, "repeat: {for_each: {<var>: <list>}, template: <value>}", dict),
    "digest": _Spec(text.digest, "digest: [<algorithm>, <value>]", list, 2, 2),
    "map_merge": _Spec(fn.map_merge, "map_merge: [<map>, <map>, ...]", list, 0, None, True),
    "map_replace": _Spec(fn.map_replace, "map_replace: [<map>, {keys: <map>, values: <map>}]", list, 2, 2),
    "list_concat": _Spec(fn.list_concat, "list_concat: [<list>, <list>, ...]", list, 0, None, True),
    "list_concat_unique": _Spec(
        fn.list_concat_unique, "list_concat_unique: [<list>, <list>, ...]", list, 0, None, True
    ),
    "contains": _Spec(fn.contains, "contains: [<value>, <list>]", list, 2, 2),
    "filter": _Spec(fn.filter_, "filter: [<values to remove>, <list>]", list, 2, 2),
    "make_url": _Spec(text.make_url, "make_url: {scheme: .., host: .., port: .., path: ..}", dict),
    "yaql": _Spec(yaql_function.yaql_eval, yaql_function.USAGE, dict, precheck=yaql_function.check_known),
}

_SCALARS = frozenset({str, int, float, bool, type(None)})
#: resource_facade's arguments (HOT, CFN) -> the facade's field; and a resource's defaults.
_HOT_FACADE = {"metadata": "metadata", "deletion_policy": "deletion_policy", "update_policy": "update_policy"}
_CFN_FACADE = {"Metadata": "metadata", "DeletionPolicy": "deletion_policy", "UpdatePolicy": "update_policy"}
_NO_FACADE: dict[str, Any] = {"metadata": {}, "deletion_policy": "Delete", "update_policy": {}}

#: Resource name -> the attribute names its type declares (a type's
#: `attributes` mapping; membership is the test, so `AnyAttributes` admits
#: all); None = unknown type, not checked.
AttributeTable = Mapping[str, Collection[str] | None]


class Compiler:
    """Compiles snippets of one stack. Not thread-safe; cheap to build."""

    def __init__(
        self,
        *,
        version: TemplateVersion,
        scope: ParamScope,
        files: Mapping[str, str],
        conditions: Conditions,
        resources: Mapping[str, bool],
        attributes: AttributeTable,
        errors: ErrorList,
        budget: Budget,
        facade: Mapping[str, Any] | None = None,
    ) -> None:
        self._budget = budget
        self._facade = facade or {}
        self._version = version
        self._scope = scope
        self._files = files
        self._conditions = conditions
        self._resources = resources
        self._attributes = attributes
        self._errors = errors
        allowed = version.functions
        handlers: dict[str, Callable[[Any, str, set[str]], Any]] = {}
        for name in allowed:
            if name in UNSUPPORTED_FUNCTIONS:
                handlers[name] = self._unsupported(name)
            elif name in _SPECS:
                handlers[name] = self._value_function(name, _SPECS[name])
        handlers.update(
            {
                "get_param": self._get_param,
                "get_resource": self._get_resource,
                "get_attr": self._get_attr,
                "get_file": self._get_file,
            }
        )
        if "if" in allowed:
            handlers["if"] = self._if
        if "Ref" in allowed:
            handlers["Ref"] = self._ref
        if "resource_facade" in allowed:
            handlers["resource_facade"] = self._resource_facade
        if "Fn::ResourceFacade" in allowed:
            handlers["Fn::ResourceFacade"] = self._resource_facade
        self._handlers = handlers

    # --- walking ---------------------------------------------------------

    def compile(self, raw: Any, path: str, refs: set[str]) -> Any:
        """`raw` with functions evaluated or compiled; adds referenced resources to `refs`."""
        if isinstance(raw, dict):
            if len(raw) == 1:
                ((key, args),) = raw.items()
                handler = self._handlers.get(key)
                if handler is not None:
                    return handler(args, join_path(path, key), refs)
                if key in ALL_FUNCTIONS:
                    self._not_available(key, join_path(path, key))
                    return Invalid(path)
            out: dict[str, Any] = {}
            dynamic = False
            for key, value in raw.items():
                if value.__class__ in _SCALARS:
                    out[key] = value
                    continue
                compiled = self.compile(value, join_path(path, key), refs)
                if compiled is OMIT:
                    continue
                if isinstance(compiled, Expr):
                    dynamic = True
                out[key] = compiled
            return DictExpr(out, path) if dynamic else out
        if isinstance(raw, list):
            items: list[Any] = []
            dynamic = False
            for index, value in enumerate(raw):
                if value.__class__ in _SCALARS:
                    items.append(value)
                    continue
                compiled = self.compile(value, join_path(path, index), refs)
                if compiled is OMIT:
                    continue
                if isinstance(compiled, Expr):
                    dynamic = True
                items.append(compiled)
            return ListExpr(items, path) if dynamic else items
        return raw

    def _static(self, args: Any, path: str, refs: set[str], what: str) -> Any:
        """Compile `args`, which must not depend on resources; NO_VALUE if not."""
        compiled = self.compile(args, path, refs)
        if isinstance(compiled, Expr):
            if _references_resources(compiled):
                self._errors.add(path, f"{what} must not depend on resources")
            return NO_VALUE
        return compiled

    def _not_available(self, name: str, path: str) -> None:
        version = self._version.date
        if name in CONDITION_ONLY:
            self._errors.add(
                path, f"{name!r} is a condition function: use it in conditions or as the condition of 'if'"
            )
            return
        first, last = first_version_with(name), last_version_with(name)
        if first is not None and first > version:
            self._errors.add(
                path,
                f"function {name!r} needs heat_template_version {first} or later (template is {version})",
            )
        elif last is not None and last < version:
            hint = {
                "Fn::Join": "list_join",
                "Fn::Select": "get_attr/get_param paths",
                "Fn::Split": "str_split",
                "Fn::Replace": "str_replace",
                "Ref": "get_resource or get_param",
            }.get(name)
            self._errors.add(
                path,
                f"function {name!r} is not available after heat_template_version {last} "
                f"(template is {version})" + (f"; use {hint}" if hint else ""),
            )
        else:
            self._errors.add(path, f"function {name!r} is not available in heat_template_version {version}")

    # --- functions evaluated at load time ----------------------------------

    def _unsupported(self, name: str) -> Callable[[Any, str, set[str]], Any]:
        def handler(args: Any, path: str, refs: set[str]) -> Any:
            self._errors.add(path, UNSUPPORTED_FUNCTIONS[name])
            return Invalid(path)

        return handler

    def _get_param(self, args: Any, path: str, refs: set[str]) -> Any:
        resolved = self._static(args, path, refs, "get_param arguments")
        if resolved is NO_VALUE:
            return Invalid(path)
        try:
            value = self._scope.get(resolved)
        except FunctionArgError as exc:
            self._errors.add(path, f"get_param: {exc}")
            return Invalid(path)
        if value is NO_VALUE:
            return Unknown(resolved if isinstance(resolved, str) else resolved[0], path)
        return value

    def _get_file(self, args: Any, path: str, refs: set[str]) -> Any:
        name = self._static(args, path, refs, "get_file arguments")
        if name is NO_VALUE:
            return Invalid(path)
        if not isinstance(name, str):
            self._errors.add(path, "get_file: expected a file name (string)")
            return Invalid(path)
        content = self._files.get(name)
        if not isinstance(content, str):
            self._errors.add(path, f"get_file: no content for {name!r} in the request's files")
            return Invalid(path)
        return content

    def _if(self, args: Any, path: str, refs: set[str]) -> Any:
        nullable = self._version.if_nullable
        if not isinstance(args, list) or len(args) not in ((2, 3) if nullable else (3,)):
            usage = "if: [<condition>, <value if true>" + (
                ", <value if false>?]" if nullable else ", <value if false>]"
            )
            self._errors.add(path, f"if: expected {usage}")
            return Invalid(path)
        if self._conditions.evaluate(args[0], join_path(path, 0)):
            return self.compile(args[1], join_path(path, 1), refs)
        if len(args) == 2:
            return OMIT
        return self.compile(args[2], join_path(path, 2), refs)

    def _resource_facade(self, args: Any, path: str, refs: set[str]) -> Any:
        """`resource_facade: metadata | deletion_policy | update_policy` (HOT) or
        `Fn::ResourceFacade: Metadata | DeletionPolicy | UpdatePolicy` (CFN): the parent
        resource's value, as resolved when the child's goal was made."""
        name = path.rsplit(".", 1)[-1]
        cfn = name == "Fn::ResourceFacade"
        keys = _CFN_FACADE if cfn else _HOT_FACADE
        key = self._static(args, path, refs, f"{name} arguments")
        if not isinstance(key, str) or key not in keys:
            self._errors.add(path, f'Incorrect arguments to "{name}" should be one of: {", ".join(keys)}')
            return Invalid(path)
        field = keys[key]
        return self._facade.get(field, _NO_FACADE[field])

    # --- references to resources ----------------------------------------

    def _check_resource(self, name: Any, path: str, what: str) -> bool:
        if not isinstance(name, str):
            self._errors.add(path, f"{what}: the resource name must be a string, not {name!r:.60}")
            return False
        enabled = self._resources.get(name)
        if enabled is None:
            self._errors.add(path, f"{what}: unknown resource {name!r}")
            return False
        if not enabled:
            self._errors.add(path, f"{what}: resource {name!r} is disabled by its condition")
            return False
        return True

    def _get_resource(self, args: Any, path: str, refs: set[str]) -> Any:
        name = self._static(args, path, refs, "get_resource arguments")
        if name is NO_VALUE or not self._check_resource(name, path, "get_resource"):
            return Invalid(path)
        refs.add(name)
        return GetResource(name, path)

    def _ref(self, args: Any, path: str, refs: set[str]) -> Any:
        name = self._static(args, path, refs, "Ref arguments")
        if isinstance(name, str) and (name in self._scope.declared or name in self._scope.pseudo):
            return self._get_param(name, path, refs)
        if name is NO_VALUE or not self._check_resource(name, path, "Ref"):
            return Invalid(path)
        refs.add(name)
        return GetResource(name, path)

    def _get_attr(self, args: Any, path: str, refs: set[str]) -> Any:
        resolved = self._static(args, path, refs, "get_attr arguments")
        if resolved is NO_VALUE:
            return Invalid(path)
        minimum = 1 if self._version.get_attr_all else 2
        if not isinstance(resolved, list) or len(resolved) < minimum:
            usage = "[<resource>, <attribute>, <key or index>...]"
            if minimum == 1:
                usage += " or [<resource>]"
            self._errors.add(path, f"get_attr: expected {usage}")
            return Invalid(path)
        name = resolved[0]
        if not self._check_resource(name, path, "get_attr"):
            return Invalid(path)
        attribute = resolved[1] if len(resolved) > 1 else None
        if attribute is not None and not isinstance(attribute, str):
            self._errors.add(path, "get_attr: the attribute name must be a string")
            return Invalid(path)
        keys = resolved[2:]
        if any(isinstance(k, bool) or not isinstance(k, str | int) for k in keys):
            self._errors.add(path, "get_attr: path components must be strings or integers")
            return Invalid(path)
        refs.add(name)  # even if the attribute is wrong: the graph stays complete
        known = self._attributes.get(name)
        if attribute is not None and known is not None and attribute not in known:
            shown = ", ".join(sorted(known)) or "none"
            self._errors.add(
                path,
                f"get_attr: resource {name!r} has no attribute {attribute!r} (its type declares: {shown})",
            )
            return Invalid(path)
        return GetAttr(name, attribute, tuple(keys), path)

    # --- value functions ----------------------------------------------------

    def _value_function(self, name: str, spec: _Spec) -> Callable[[Any, str, set[str]], Any]:
        version = self._version

        def handler(args: Any, path: str, refs: set[str]) -> Any:
            compiled = self.compile(args, path, refs)
            if isinstance(compiled, Unknown):
                return compiled
            problem = _shape_problem(spec, compiled)
            if problem is not None:
                self._errors.add(path, f"{name}: {problem}; usage: {spec.usage}")
                return Invalid(path)
            try:
                if spec.precheck is not None:
                    spec.precheck(
                        compiled.items if isinstance(compiled, DictExpr) else compiled, self._budget
                    )
                if isinstance(compiled, Expr):
                    return Call(name, spec.impl, compiled, version, path)
                return spec.impl(compiled, version, self._budget)
            except BudgetExceeded as exc:
                raise exc.located(path, name) from None
            except FunctionArgError as exc:
                self._errors.add(path, f"{name}: {exc}")
                return Invalid(path)
            except RecursionError:
                self._errors.add(path, f"{name}: value nested too deeply")
                return Invalid(path)

        return handler


def _references_resources(value: Any) -> bool:
    if isinstance(value, GetResource | GetAttr):
        return True
    if isinstance(value, ListExpr):
        return any(_references_resources(v) for v in value.items)
    if isinstance(value, DictExpr):
        return any(_references_resources(v) for v in value.items.values())
    if isinstance(value, Call):
        return _references_resources(value.args)
    return False


def _shape_problem(spec: _Spec, compiled: Any) -> str | None:
    """What is structurally wrong with the arguments, as far as known now."""
    if isinstance(compiled, Expr) and not isinstance(compiled, ListExpr | DictExpr):
        if spec.dynamic_args or spec.shape is object:
            return None
        return f"arguments must be written as a {'list' if spec.shape is list else 'map'}"
    if spec.shape is list:
        items = compiled.items if isinstance(compiled, ListExpr) else compiled
        if not isinstance(items, list):
            return "arguments must be a list"
        if len(items) < spec.min_len or (spec.max_len is not None and len(items) > spec.max_len):
            return f"wrong number of arguments ({len(items)})"
    elif spec.shape is dict:
        items = compiled.items if isinstance(compiled, DictExpr) else compiled
        if not isinstance(items, dict):
            return "arguments must be a map"
    return None
