"""Heat v1 stack routes: list, create, show, update, patch, delete, outputs.

A stack is addressed as `stacks/{name}/{id}`; `stacks/{name}` and
`stacks/{id}` (with any sub-path) answer 302 to that canonical URL, and
clients re-send the same request there. Sub-paths under a stack (resources,
events, actions) are dispatched to their modules from here.

A stack is always looked up within the URL's project, for admins too (an
admin may use any project's URL, and lists every project's stacks with
`global_tenant=true`). The one request that may come without a project token
is a resource signal with a handle's token; anything else unauthenticated is
the same 401, whatever exists.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from services.engine.api import live
from services.engine.api import resources as resource_routes
from services.engine.api import snapshots as snapshot_routes
from services.engine.api.auth import AUTH_REQUIRED, PRINCIPAL
from services.engine.api.deps import ApiDeps
from services.engine.api.errors import bad_request, not_found, unauthorized
from services.engine.api.masking import NO_SECRETS
from services.engine.api.requests import StackBody, parse_body, query_values, read_json, storable_text
from services.engine.api.views import json_response, output_view, stack_detail, stack_path, stack_summary
from services.engine.core.model import Action, StackId, StackRow
from services.engine.goals import Goal
from services.engine.observation import observe_settings
from services.engine.operations import draft_stack
from services.engine.store.queries import StackFilter, StackView
from services.engine.template.environment import FACADE_SECTION
from shared.errors import ConflictError

MAX_LIST = 1000
MAX_FILTER_TAGS = 50  # tags one list filter may name
MAX_TAG_LENGTH = 255
HOT_SECTIONS = (
    "heat_template_version",
    "description",
    "parameter_groups",
    "parameters",
    "conditions",
    "resources",
    "outputs",
)
STACK_ACTIONS = {"check": Action.CHECK, "suspend": Action.SUSPEND, "resume": Action.RESUME}


def base_url(request: web.Request) -> str:
    return f"{request.url.origin()}/v1/{request.match_info['project']}"


def url_project(request: web.Request) -> str:
    """The URL's project; one no project id can be (only an admin gets this far with it) is 404."""
    project = request.match_info["project"]
    if not storable_text(project):
        raise not_found("The resource could not be found.")
    return project


class StackRoutes:
    def __init__(self, deps: ApiDeps) -> None:
        self._d = deps

    def routes(self) -> list[web.RouteDef]:
        return [
            web.get("/v1/{project}/stacks", self.index),
            web.post("/v1/{project}/stacks", self.create),
            web.post("/v1/{project}/stacks/preview", self.preview_create),
            web.route("*", "/v1/{project}/stacks/{tail:.+}", self.dispatch),
        ]

    # -- collection ---------------------------------------------------------

    async def index(self, request: web.Request) -> web.Response:
        q = request.query
        principal = request[PRINCIPAL]
        everyone = principal.admin and q.get("global_tenant", "").lower() == "true"
        try:
            marker = uuid.UUID(q["marker"]) if "marker" in q else None
            limit = min(int(q.get("limit", MAX_LIST)), MAX_LIST)
        except ValueError as exc:
            raise bad_request(f"bad paging parameter: {exc}") from exc
        stacks = await self._d.queries.stacks(
            StackFilter(
                project_id=None if everyone else url_project(request),
                names=query_values(request, ("name", "stack_name")),
                statuses=query_values(request, ("stack_status", "status")),
                ids=[uuid.UUID(i) for i in q.getall("id", []) if _is_uuid(i)],
                tags=tag_filter(request, "tags"),
                tags_any=tag_filter(request, "tags_any"),
                not_tags=tag_filter(request, "not_tags"),
                not_tags_any=tag_filter(request, "not_tags_any"),
                show_deleted=q.get("show_deleted", "").lower() == "true",
                show_nested=q.get("show_nested", "").lower() == "true",
                sort_key=q.get("sort_keys", "creation_time"),
                sort_dir=q.get("sort_dir", "desc"),
                limit=max(limit, 0),
                marker=marker,
            )
        )
        base = base_url(request)
        secrets = await self._d.secrets.for_stacks([s.stack_id for s in stacks])
        views = [stack_summary(s, base, secrets=secrets.get(s.stack_id, NO_SECRETS)) for s in stacks]
        if q.get("with_resource_counts", "").lower() == "true":  # a Converge extension (the dashboard)
            counts = await self._d.queries.resource_counts([s.stack_id for s in stacks])
            for view, s in zip(views, stacks, strict=True):
                view["resource_counts"] = counts[s.stack_id]
        if q.get("with_observation", "").lower() == "true":  # a Converge extension (the dashboard)
            observed = await self._d.queries.observation_summaries([s.stack_id for s in stacks])
            for view, s in zip(views, stacks, strict=True):
                view["observation"] = observed[s.stack_id]
        return json_response({"stacks": views})

    async def create(self, request: web.Request) -> web.Response:
        body = (await parse_body(request, StackBody)).for_create()
        if body.stack_name is None:
            raise bad_request("stack_name is required")
        if not body.has_template() and body.adopt_stack_data is None:
            raise bad_request("a template is required")
        project = url_project(request)
        stack_id = await self._d.operations.create(  # parses and validates in the template pool
            project_id=project,
            name=body.stack_name,
            goal=body.goal_spec(adopt=True),
            disable_rollback=body.disable_rollback,
            timeout_mins=body.timeout_mins,
            tags=body.tag_list(),
        )
        location = stack_path(base_url(request), body.stack_name, stack_id)
        return json_response(
            {"stack": {"id": str(stack_id), "links": [{"href": location, "rel": "self"}]}},
            status=201,
            headers={"Location": location},
        )

    async def preview_create(self, request: web.Request) -> web.Response:
        """Validate a create and show the stack it would make, changing nothing."""
        body = await parse_body(request, StackBody)
        if body.stack_name is None or not body.has_template():
            raise bad_request("stack_name and a template are required")
        project = url_project(request)
        draft = preview_stack(project, body.stack_name, body.disable_rollback, body.timeout_mins)
        definition = await self._d.operations.validate_new(body.goal_spec(), draft)
        base = base_url(request)
        view = stack_detail(
            preview_view(draft, body.tag_list()),
            base,
            description=definition.template.description,
            parameters=definition.parameters,
            hidden=definition.hidden_parameters(),
            outputs=None,
        )
        view["resources"] = [
            {
                "resource_name": n,
                "resource_type": r.type,
                "stack_name": body.stack_name,
                "resource_action": "INIT",
                "resource_status": "COMPLETE",
                "required_by": sorted(definition.dependents(n)),
            }
            for n, r in definition.resources.items()
        ]
        return json_response({"stack": view})

    async def preview_update(self, request: web.Request, stack: StackView) -> web.Response:
        body = await parse_body(request, StackBody)
        current = await self._current_goal(stack)
        if not body.has_template() and not body.existing:
            raise bad_request("a template is required (or existing: true to keep the current one)")
        changes, goal = await self._d.operations.preview_update(
            StackId(stack.stack_id), body.goal_spec(current if body.existing else None)
        )
        new_types = {
            n: r["type"] for n, r in goal.template.get("resources", {}).items() if isinstance(r, dict)
        }

        def entry(item: Any) -> dict[str, Any]:
            if isinstance(item, str):
                return {"resource_name": item, "resource_type": new_types.get(item), "stack_name": stack.name}
            return {
                "resource_name": item.name,
                "resource_type": item.type,
                "stack_name": stack.name,
                "physical_resource_id": item.physical_id or "",
                "resource_action": item.action.value,
                "resource_status": item.status.value,
            }

        return json_response({"resource_changes": {k: [entry(i) for i in v] for k, v in changes.items()}})

    # -- one stack ------------------------------------------------------------

    async def dispatch(self, request: web.Request) -> web.StreamResponse:
        segments = [s for s in request.match_info["tail"].split("/") if s]
        # "stacks//" has no name; no stack name can hold a NUL (and PostgreSQL cannot compare one)
        ident = segments[0] if segments and storable_text(segments[0]) else None
        stack = await self._d.queries.stack(url_project(request), ident) if ident else None
        authenticated = PRINCIPAL in request
        if stack is None:
            if not authenticated:
                raise unauthorized(AUTH_REQUIRED)
            raise not_found(f"The Stack ({ident or ''}) could not be found.")
        canonical = len(segments) > 1 and segments[1] == str(stack.stack_id) and segments[0] == stack.name
        if not canonical:
            if not authenticated:
                raise unauthorized(AUTH_REQUIRED)
            rest = segments[2:] if len(segments) > 1 and segments[1] == str(stack.stack_id) else segments[1:]
            target = "/".join([stack_path(base_url(request), stack.name, stack.stack_id), *rest])
            if request.query_string:
                target += f"?{request.query_string}"
            raise web.HTTPFound(target)
        return await self._on_stack(request, stack, segments[2:])

    async def _on_stack(self, request: web.Request, stack: StackView, rest: list[str]) -> web.StreamResponse:
        method = request.method
        if PRINCIPAL not in request and not resource_routes.is_signal(method, rest):
            raise unauthorized(AUTH_REQUIRED)
        if not rest:
            handler = {"GET": self.show, "PUT": self.update, "PATCH": self.patch, "DELETE": self.delete}.get(
                method
            )
            if handler is None:
                raise web.HTTPMethodNotAllowed(method, ["GET", "PUT", "PATCH", "DELETE"])
            return await handler(request, stack)
        head = rest[0]
        if head in ("template", "environment", "files") and method == "GET" and len(rest) == 1:
            return await self.stored(request, stack, head)
        if rest == ["template", "source"] and method == "GET":
            return await self.template_source(stack)
        if head == "outputs" and method == "GET" and len(rest) <= 2:
            return await self.outputs(request, stack, rest[1] if len(rest) == 2 else None)
        if head == "preview" and method == "PUT" and len(rest) == 1:
            return await self.preview_update(request, stack)
        if head == "actions" and method == "POST" and len(rest) == 1:
            return await self.action(request, stack)
        if head == "observation" and method == "GET" and len(rest) == 1:
            return await self.observation(stack)
        if head == "graph" and method == "GET" and len(rest) == 1:
            return await live.graph(self._d, request, stack)
        if head == "stream" and method == "GET" and len(rest) == 1:
            return await live.stream(self._d, request, stack)
        if head == "abandon" and method == "DELETE" and len(rest) == 1:
            return json_response(await self._d.operations.abandon(StackId(stack.stack_id)))
        if head in ("resources", "events"):
            return await resource_routes.dispatch(self._d, request, stack, rest)
        if snapshot_routes.is_snapshot_path(rest):
            return await snapshot_routes.dispatch(self._d, request, stack, rest)
        raise not_found(f"no such path under stack {stack.name}: /{'/'.join(rest)}")

    async def show(self, request: web.Request, stack: StackView) -> web.Response:
        definition, outputs = await self._d.definition_and_outputs(stack)
        view = stack_detail(
            stack,
            base_url(request),
            description=definition.template.description if definition else "",
            parameters=definition.parameters if definition else {},
            hidden=definition.hidden_parameters() if definition else frozenset(),
            outputs=outputs,
            secrets=await self._d.secrets.for_view(stack),
        )
        return json_response({"stack": view})

    async def observation(self, stack: StackView) -> web.Response:
        """The observation, drift values from hidden parameters masked (the expected value
        is what Converge applied, often straight from a parameter)."""
        view = await self._d.observing.view(StackId(stack.stack_id))
        secrets = await self._d.secrets.for_stack(stack.stack_id)
        view["drifted"] = [
            {**d, "reason": secrets.mask(d["reason"]), "differences": secrets.mask(d["differences"])}
            for d in view["drifted"]
        ]
        return json_response({"observation": view})

    async def update(self, request: web.Request, stack: StackView) -> web.Response:
        """Update to the template and inputs given; tags not given are removed, timeout_mins
        and disable_rollback not given are kept (Heat's rules, `core.updates`)."""
        body = await parse_body(request, StackBody)
        if not body.has_template():
            raise bad_request("a template is required (use PATCH to keep the current one)")
        settings = body.update_settings()
        await self._d.operations.update(StackId(stack.stack_id), body.goal_spec(), settings=settings)
        return web.Response(status=202)

    async def patch(self, request: web.Request, stack: StackView) -> web.Response:
        """Update keeping what is omitted: the template, files, the environment and the
        parameters merged as Heat merges them, less `clear_parameters`; tags too."""
        body = await parse_body(request, StackBody)
        current = await self._current_goal(stack)
        goal, settings = body.goal_spec(current), body.update_settings()
        await self._d.operations.update(StackId(stack.stack_id), goal, settings=settings, patch=True)
        return web.Response(status=202)

    async def delete(self, request: web.Request, stack: StackView) -> web.Response:
        await self._d.operations.delete(StackId(stack.stack_id))
        return web.Response(status=204)

    async def _current_goal(self, stack: StackView) -> Goal:
        if stack.current_template_id is None:
            raise ConflictError(f"stack {stack.name} has no template yet")
        record = await self._d.queries.template(stack.current_template_id)
        if record is None:
            raise ConflictError(f"stack {stack.name} has no template yet")
        return Goal(record.template, record.environment, record.parameters, record.files, record.source)

    async def stored(self, request: web.Request, stack: StackView, what: str) -> web.Response:
        goal = await self._current_goal(stack)
        value: Any = {"template": goal.template, "environment": goal.environment, "files": goal.files}[what]
        if what == "environment":  # hidden parameters' values masked, as Heat does
            value = {"parameters": {}, "parameter_defaults": {}, "resource_registry": {}, **dict(value)}
            value.pop(FACADE_SECTION, None)  # Converge's own, for a child's resource_facade
            secrets = await self._d.secrets.for_stack(stack.stack_id)
            for section in ("parameters", "parameter_defaults"):
                if isinstance(value[section], dict):
                    value[section] = secrets.parameters(value[section])
        return json_response(value)

    async def template_source(self, stack: StackView) -> web.Response:
        """The current template as the user sent it (a Converge extension: Heat's `.../template`
        answers the parsed document). A template sent as an object, or adopted, has no text:
        it is answered as JSON text of the stored document, its sections in HOT's order, with
        `as_sent` false."""
        goal = await self._current_goal(stack)
        if goal.source is not None:
            return json_response({"source": goal.source, "as_sent": True})
        order = {k: i for i, k in enumerate(HOT_SECTIONS)}
        sections = sorted(goal.template.items(), key=lambda kv: (order.get(kv[0], len(order)), kv[0]))
        text = json.dumps(dict(sections), indent=2, ensure_ascii=False)
        return json_response({"source": text + "\n", "as_sent": False})

    async def outputs(self, request: web.Request, stack: StackView, key: str | None) -> web.Response:
        _, outputs = await self._d.definition_and_outputs(stack)
        if key is None:
            return json_response(
                {"outputs": [output_view(k, v, with_value=False) for k, v in outputs.items()]}
            )
        if key not in outputs:
            raise not_found(f"Specified output key {key} not found.")
        return json_response({"output": output_view(key, outputs[key])})

    async def action(self, request: web.Request, stack: StackView) -> web.Response:
        body = await read_json(request)
        if not isinstance(body, dict) or len(body) != 1:
            raise bad_request('an action body has exactly one key, e.g. {"check": null}')
        (name,) = body
        if name in ("cancel_update", "cancel_without_rollback"):
            await self._d.operations.cancel(StackId(stack.stack_id), rollback=name == "cancel_update")
            return web.Response(status=200)
        if name in STACK_ACTIONS:
            await self._d.operations.stack_action(StackId(stack.stack_id), STACK_ACTIONS[name])
            return web.Response(status=200)
        if name == "observe_start":
            interval, heal = observe_settings(body[name])
            await self._d.observing.start(StackId(stack.stack_id), interval=interval, heal=heal)
            return web.Response(status=200)
        if name == "observe_stop":
            await self._d.observing.stop(StackId(stack.stack_id))
            return web.Response(status=200)
        raise bad_request(f"the {name} action is not supported yet", "NotSupported")


def preview_stack(project: str, name: str, disable_rollback: bool, timeout_mins: int | None) -> StackRow:
    return draft_stack(StackId(uuid.UUID(int=0)), project, name, disable_rollback, timeout_mins)


def preview_view(stack: StackRow, tags: list[str]) -> StackView:
    now = datetime.now(UTC)
    return StackView(
        stack_id=stack.stack_id,
        project_id=stack.project_id,
        name=stack.name,
        action="INIT",
        status="COMPLETE",
        status_reason="",
        current_template_id=None,
        previous_template_id=None,
        disable_rollback=stack.disable_rollback,
        timeout_mins=stack.timeout_mins,
        tags=tuple(tags),
        created_at=now,
        updated_at=None,
        deleted_at=None,
    )


def tag_filter(request: web.Request, name: str) -> list[str]:
    """A tags filter of the stack list: comma-separated tags, the parameter repeatable (as
    Heat takes it); at most MAX_FILTER_TAGS tags of at most MAX_TAG_LENGTH characters."""
    tags = [t.strip() for value in query_values(request, (name,)) for t in value.split(",") if t.strip()]
    if len(tags) > MAX_FILTER_TAGS:
        raise bad_request(f"{name}: at most {MAX_FILTER_TAGS} tags, got {len(tags)}")
    if too_long := [t for t in tags if len(t) > MAX_TAG_LENGTH]:
        raise bad_request(f"{name}: a tag is at most {MAX_TAG_LENGTH} characters: {too_long[0][:40]!r}...")
    return tags


def _is_uuid(text: str) -> bool:
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True
