"""Heat v1 catalog routes: resource types, template versions and their
functions, template validation (in the template pool) and build_info.
Nothing here touches a stack.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from services.engine.api.deps import ApiDeps
from services.engine.api.errors import not_found
from services.engine.api.requests import StackBody, parse_body
from services.engine.api.snapshots import build_info
from services.engine.api.views import json_response
from services.engine.goals import validate_goal
from services.engine.template.versions import VERSIONS, TemplateVersion
from shared.plugins.registry import type_schema

#: One line per function, shown by GET template_versions/{version}/functions.
FUNCTION_DESCRIPTIONS: dict[str, str] = {
    "get_attr": "A function for resolving resource attributes.",
    "get_file": "A function for including a file inline.",
    "get_param": "A function for resolving parameter references.",
    "get_resource": "A function for resolving resource references.",
    "list_join": "A function for joining strings or lists.",
    "str_replace": "A function for performing string substitutions.",
    "str_replace_strict": "A string substitution that fails when a key is not found.",
    "str_replace_vstrict": "A string substitution that fails when a key is missing or a value empty.",
    "str_split": "A function for splitting strings into lists.",
    "repeat": "A function for iterating over a list of items.",
    "digest": "A function for computing a message digest of a value.",
    "map_merge": "A function for merging maps.",
    "map_replace": "A function for replacing the keys and values of a map.",
    "list_concat": "A function for concatenating lists.",
    "list_concat_unique": "A function for concatenating lists, dropping repeated items.",
    "contains": "A function for checking whether a value is in a sequence.",
    "filter": "A function for removing values from a list.",
    "make_url": "A function for building a URL from its parts.",
    "if": "A function returning one of two values depending on a condition.",
    "equals": "A function for comparing whether two values are equal.",
    "not": "A function returning the opposite of a condition.",
    "and": "A function that is true when every condition is true.",
    "or": "A function that is true when any condition is true.",
    "yaql": "A function for evaluating a YAQL expression on data (bound as $.data).",
    "resource_facade": "A function for retrieving data in a parent provider template.",
}


def _version_name(version: TemplateVersion) -> str:
    return f"heat_template_version.{version.date}"


def _versions() -> list[TemplateVersion]:
    unique = {v.date: v for v in VERSIONS.values()}
    return [unique[d] for d in sorted(unique)]


class CatalogRoutes:
    def __init__(self, deps: ApiDeps) -> None:
        self._d = deps

    def routes(self) -> list[web.RouteDef]:
        return [
            web.get("/v1/{project}/resource_types", self.types),
            web.get("/v1/{project}/resource_types/{type}", self.type_show),
            web.get("/v1/{project}/resource_types/{type}/template", self.type_template),
            web.get("/v1/{project}/template_versions", self.versions),
            web.get("/v1/{project}/template_versions/{version}/functions", self.functions),
            web.post("/v1/{project}/validate", self.validate),
            web.get("/v1/{project}/build_info", build_info),
        ]

    async def types(self, request: web.Request) -> web.Response:
        name_filter = request.query.get("name")
        names = sorted(n for n in self._d.types if name_filter is None or name_filter in n)
        if request.query.get("with_description", "").lower() == "true":
            return json_response(
                {
                    "resource_types": [
                        {"resource_type": n, "description": self._d.types[n].description} for n in names
                    ]
                }
            )
        return json_response({"resource_types": names})

    def _type(self, request: web.Request) -> Any:
        name = request.match_info["type"]
        cls = self._d.types.get(name)
        if cls is None:
            raise not_found(f"The Resource Type ({name}) could not be found.")
        return cls

    async def type_show(self, request: web.Request) -> web.Response:
        return json_response(type_schema(self._type(request)))

    async def type_template(self, request: web.Request) -> web.Response:
        cls = self._type(request)
        schema = type_schema(cls)
        short = cls.type_name.split("::")[-1]
        parameters = {
            name: {
                k: v
                for k, v in (
                    ("type", spec.get("type")),
                    ("description", spec.get("description")),
                    ("default", spec.get("default")),
                )
                if v is not None
            }
            for name, spec in schema["properties"].items()
        }
        template = {
            "heat_template_version": "2016-10-14",
            "description": f"Initial template of {short}",
            "parameters": parameters,
            "resources": {
                short: {"type": cls.type_name, "properties": {n: {"get_param": n} for n in parameters}}
            },
            "outputs": {
                name: {"description": spec.get("description", ""), "value": {"get_attr": [short, name]}}
                for name, spec in schema.get("attributes", {}).items()
            },
        }
        return json_response(template)

    async def versions(self, request: web.Request) -> web.Response:
        return json_response(
            {
                "template_versions": [
                    {
                        "version": _version_name(v),
                        "type": "hot",
                        "aliases": [f"heat_template_version.{v.alias}"] if v.alias else [],
                    }
                    for v in _versions()
                ]
            }
        )

    async def functions(self, request: web.Request) -> web.Response:
        wanted = request.match_info["version"].removeprefix("heat_template_version.")
        version = VERSIONS.get(wanted)
        if version is None:
            raise not_found(f"The template version ({request.match_info['version']}) could not be found.")
        names = set(version.functions)
        if request.query.get("with_condition_func", "").lower() == "true":
            names |= version.condition_functions
        return json_response(
            {
                "template_functions": [
                    {"functions": n, "description": FUNCTION_DESCRIPTIONS.get(n, f"The {n} function.")}
                    for n in sorted(names)
                ]
            }
        )

    async def validate(self, request: web.Request) -> web.Response:
        body = await parse_body(request, StackBody)
        if not body.has_template():
            raise web.HTTPBadRequest(text="a template is required")
        response = await self._d.templates.run(  # parsed and evaluated in the template pool
            validate_goal,
            body.goal_spec(),
            request.match_info["project"],
            self._d.types,
            self._d.limits,
            self._d.constraints,
        )
        return json_response(response)
