"""OS::Heat::SoftwareDeployment and OS::Heat::StructuredDeployment: a config run on a server.

Where they sit: declared here like any type, but their deployments live in the
engine's `software_deployments` table, so their jobs are run by the engine
(`services.engine.deployments`, reached through `services.engine.configs`), in
the transaction that issues them, and a worker handed one refuses it. The
resource's physical id is the deployment's id.

What happens: the engine derives a config for the server (the source config,
its inputs given the deployment's `input_values` and Heat's `deploy_*` inputs,
for StructuredDeployment its `get_input` references substituted) and writes the
deployment IN_PROGRESS; the server's agent finds it in
`GET /software_deployments/metadata/{server}`, runs it and signals the result
(HEAT_SIGNAL: a resource signal or `PUT /software_deployments/{id}`;
TEMP_URL_SIGNAL: a PUT to the URL in the `deploy_signal_id` input), which
completes the resource's job: a non-zero `deploy_status_code` fails it, with
`deploy_stderr` in the reason. With NO_SIGNAL, or for an action not in
`actions`, the job completes at once. DELETE, SUSPEND and RESUME are delivered
(and waited for) when `actions` names them. CFN_SIGNAL and ZAQAR_SIGNAL are
refused by name wherever the properties are checked (`SignalTransport`).

OS::Heat::SoftwareDeploymentGroup and StructuredDeploymentGroup deploy to every
server of their `servers` map: they are nested stacks of one deployment per server
(`services.engine.core.child_goals`), with attributes that map each server's name to
its deployment's (`group_members`, `group_attributes`).

The pure parts the engine uses: `derived_config`, `signal_outcome`,
`group_members` and `group_attributes`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator

from shared.errors import InvalidInput, PermanentError
from shared.plugins.base import ActionContext, ActionResult, Properties, ResourceType, UpdateRule, prop

DEPLOYMENT_TYPES = ("OS::Heat::SoftwareDeployment", "OS::Heat::StructuredDeployment")
HEAT_SIGNAL = "HEAT_SIGNAL"
NO_SIGNAL = "NO_SIGNAL"
#: The pollable-URL transport (Heat's name): the agent PUTs its outputs to `deploy_signal_id`.
TEMP_URL_SIGNAL = "TEMP_URL_SIGNAL"
#: Heat's transports Converge does not offer (no CFN API, no Zaqar), named in the refusal.
UNSUPPORTED_TRANSPORTS = ("CFN_SIGNAL", "ZAQAR_SIGNAL")
#: The deployment's own outputs, beside those its config declares.
STANDARD_OUTPUTS = ("deploy_stdout", "deploy_stderr", "deploy_status_code")
DeployAction = Literal["CREATE", "UPDATE", "DELETE", "SUSPEND", "RESUME"]
#: The inputs the engine gives every derived config (the last two with TEMP_URL_SIGNAL only).
DEPLOY_INPUTS = frozenset(
    {
        "deploy_server_id",
        "deploy_action",
        "deploy_stack_id",
        "deploy_resource_name",
        "deploy_signal_transport",
        "deploy_signal_id",
        "deploy_signal_verb",
    }
)
#: Most characters of stderr a failure reason quotes.
REASON_STDERR_CHARS = 1000


def _known_transport(value: Any) -> Any:
    if value in UNSUPPORTED_TRANSPORTS:
        offered = "HEAT_SIGNAL, TEMP_URL_SIGNAL or NO_SIGNAL"
        raise ValueError(f"{value} is not supported by Converge; use {offered}")
    return value


#: A transport Converge offers; Heat's others are refused by name (also where a template is checked).
SignalTransport = Annotated[
    Literal["HEAT_SIGNAL", "TEMP_URL_SIGNAL", "NO_SIGNAL"], BeforeValidator(_known_transport)
]


class DeploymentCommon(Properties):
    """What a deployment and a deployment group both take."""

    config: str | None = prop(
        None,
        description="Id of the software config to deploy (get_resource of an OS::Heat::SoftwareConfig); "
        "a change deploys the new config.",
    )
    input_values: dict[str, Any] = prop({}, description="Values of the config's inputs, by name.")
    actions: list[DeployAction] = prop(
        ["CREATE", "UPDATE"],
        description="Which lifecycle actions of the deployment run the config on the server; "
        "for the others the deployment completes at once.",
    )
    signal_transport: SignalTransport = prop(
        HEAT_SIGNAL,
        description="How the server reports the result: HEAT_SIGNAL (a resource signal, or PUT on "
        "the deployment, from the server's agent), TEMP_URL_SIGNAL (an HTTP PUT of the outputs to "
        "the URL in the deployment's deploy_signal_id input, authorised by the token in it) or "
        "NO_SIGNAL (the deployment completes at once). CFN_SIGNAL and ZAQAR_SIGNAL are refused.",
    )
    name: str | None = prop(None, description="Name of the derived config the server runs.", max_length=255)


class StructuredInputs(Properties):
    """A structured deployment's (or group's) input substitution."""

    input_key: str = prop(
        "get_input",
        description="Key in the structured config whose value names an input to substitute.",
        min_length=1,
    )
    input_values_validate: Literal["LAX", "STRICT"] = prop(
        "LAX", description="STRICT: every input the config references must have a value."
    )


class SoftwareDeploymentProperties(DeploymentCommon):
    server: str = prop(
        description="Id of the server to deploy to (its agent polls for it); a change replaces "
        "the deployment.",
        update=UpdateRule.REPLACE,
        min_length=1,
        max_length=255,
    )


class StructuredDeploymentProperties(SoftwareDeploymentProperties, StructuredInputs):
    pass


class DeploymentAttributes(Mapping[str, str]):
    """deploy_stdout, deploy_stderr, deploy_status_code, and any output the config declares."""

    _named = {
        "deploy_stdout": "Captured stdout from the configuration execution.",
        "deploy_stderr": "Captured stderr from the configuration execution.",
        "deploy_status_code": "Returned status code from the configuration execution.",
    }

    def __getitem__(self, name: str) -> str:
        return self._named.get(name, "An output the deployment's config declares.")

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str)

    def __iter__(self) -> Iterator[str]:
        return iter(self._named)

    def __len__(self) -> int:
        return len(self._named)


@dataclass(frozen=True)
class DeployContext:
    """Who the derived config is for (Heat's deploy_* inputs)."""

    server_id: str
    action: str
    stack_id: str  # "<stack name>/<stack id>", as Heat gives it
    resource_name: str
    signal_transport: str
    signal_url: str | None = None  # TEMP_URL_SIGNAL: where the agent PUTs its outputs


def _substitute(value: Any, key: str, inputs: Mapping[str, Any], missing: set[str]) -> Any:
    """StructuredDeployment: `{key: name}` maps become the input's value."""
    if isinstance(value, dict):
        if len(value) == 1 and key in value and isinstance(value[key], str):
            name = value[key]
            if name not in inputs:
                missing.add(name)
                return None
            return inputs[name]
        return {k: _substitute(v, key, inputs, missing) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute(v, key, inputs, missing) for v in value]
    return value


def derived_config(
    source: Mapping[str, Any], props: SoftwareDeploymentProperties, deploy: DeployContext
) -> dict[str, Any]:
    """The config the server runs (the `config` column: config, inputs, outputs, options).
    Pure. Each declared input takes its value from `input_values`, else its default;
    Heat's `deploy_*` inputs say which server, action, stack and resource it is for."""
    declared: Sequence[Mapping[str, Any]] = source.get("inputs") or []
    values = dict(props.input_values)
    inputs: list[dict[str, Any]] = []
    for item in declared:
        name = item["name"]
        value = values.pop(name, item.get("default"))
        inputs.append({**item, "value": value})
    for name, value in values.items():  # undeclared values are passed on as strings, as Heat does
        inputs.append({"name": name, "type": "String", "value": value})
    # The engine's deploy_* inputs are its own: a value given under one of their names (which
    # could point a TEMP_URL_SIGNAL agent at another URL) is dropped, not passed on first.
    inputs = [i for i in inputs if i["name"] not in DEPLOY_INPUTS]
    inputs += [
        {"name": "deploy_server_id", "type": "String", "value": deploy.server_id,
         "description": "ID of the server being deployed to"},
        {"name": "deploy_action", "type": "String", "value": deploy.action,
         "description": "Name of the current action being deployed"},
        {"name": "deploy_stack_id", "type": "String", "value": deploy.stack_id,
         "description": "ID of the stack this deployment belongs to"},
        {"name": "deploy_resource_name", "type": "String", "value": deploy.resource_name,
         "description": "Name of this deployment resource in the stack"},
        {"name": "deploy_signal_transport", "type": "String", "value": deploy.signal_transport,
         "description": "How the server should signal to heat with the deployment output values."},
    ]  # fmt: skip
    if deploy.signal_url is not None:
        inputs += [
            {"name": "deploy_signal_id", "type": "String", "value": deploy.signal_url,
             "description": "ID of signal to use for signaling output values"},
            {"name": "deploy_signal_verb", "type": "String", "value": "PUT",
             "description": "HTTP verb to use for signaling output values"},
        ]  # fmt: skip
    config = source.get("config")
    if isinstance(props, StructuredDeploymentProperties):
        by_name = {i["name"]: i["value"] for i in inputs}
        missing: set[str] = set()
        config = _substitute(config, props.input_key, by_name, missing)
        if missing and props.input_values_validate == "STRICT":
            raise PermanentError(
                f"input_values: no value for the config's input(s) {', '.join(sorted(missing))} "
                "(input_values_validate is STRICT)"
            )
    return {
        "config": config,
        "inputs": inputs,
        "outputs": list(source.get("outputs") or []),
        "options": dict(source.get("options") or {}),
    }


@dataclass(frozen=True)
class SignalOutcome:
    """What an agent's signal says about a deployment."""

    ok: bool
    output_values: dict[str, Any]
    reason: str


def signal_outcome(
    details: Mapping[str, Any], declared_outputs: Sequence[Mapping[str, Any]]
) -> SignalOutcome:
    """Heat's rules for a deployment signal: the outputs are the standard three and those
    the config declares; a non-zero deploy_status_code, or a non-empty output the config
    marks `error_output`, fails the deployment. Pure."""
    if not isinstance(details, Mapping):
        raise InvalidInput("a deployment signal is a JSON object")
    names = [*STANDARD_OUTPUTS, *(str(o["name"]) for o in declared_outputs if "name" in o)]
    outputs = {name: details[name] for name in names if name in details}
    code = outputs.get("deploy_status_code", 0)
    try:
        failed_code = int(code or 0) != 0
    except (TypeError, ValueError):
        raise InvalidInput(
            f"deploy_status_code must be an integer, not {code!r}", path="deploy_status_code"
        ) from None
    if failed_code:
        stderr = str(outputs.get("deploy_stderr") or "")[:REASON_STDERR_CHARS]
        return SignalOutcome(False, outputs, f"Deployment exited with non-zero status code: {code}: {stderr}")
    for out in declared_outputs:
        if out.get("error_output") and outputs.get(str(out.get("name"))):
            name = str(out["name"])
            return SignalOutcome(False, outputs, f"Deployment failed: {name}: {outputs[name]}")
    return SignalOutcome(True, outputs, "Outputs received")


class SoftwareDeployment(ResourceType):
    type_name = "OS::Heat::SoftwareDeployment"
    description = "Runs a software config on a server; completes when the server's agent signals."
    properties = SoftwareDeploymentProperties
    attributes = DeploymentAttributes()
    attribute_types = dict.fromkeys(("deploy_stdout", "deploy_stderr"), "String") | {
        "deploy_status_code": "Integer"
    }
    support_version = "2014.1"

    def _refuse(self) -> PermanentError:
        return PermanentError(
            f"{self.type_name} is run by the engine (it stores the deployment), not by a worker"
        )

    async def create(self, ctx: ActionContext, props: Properties) -> ActionResult:
        raise self._refuse()

    async def delete(self, ctx: ActionContext, physical_id: str, props: Properties) -> ActionResult:
        raise self._refuse()


class StructuredDeployment(SoftwareDeployment):
    type_name = "OS::Heat::StructuredDeployment"
    description = "Runs a structured config on a server, its get_input references replaced by input values."
    properties = StructuredDeploymentProperties


# -- deployment groups ------------------------------------------------------------

DEPLOYMENT_GROUP_TYPES = ("OS::Heat::SoftwareDeploymentGroup", "OS::Heat::StructuredDeploymentGroup")
#: The member type of each group type.
MEMBER_TYPES = dict(zip(DEPLOYMENT_GROUP_TYPES, DEPLOYMENT_TYPES, strict=True))


class SoftwareDeploymentGroupProperties(DeploymentCommon):
    servers: dict[str, str] = prop(
        description="Servers to deploy to, as a map of name -> server id; each name is a member of "
        "the group (adding a name deploys to one more server, removing one deletes its deployment).",
    )


class StructuredDeploymentGroupProperties(SoftwareDeploymentGroupProperties, StructuredInputs):
    pass


def group_members(props: SoftwareDeploymentGroupProperties) -> dict[str, dict[str, Any]]:
    """The properties of each member deployment, by server name. Pure."""
    common = props.model_dump(exclude={"servers"}, exclude_none=True)
    return {name: {**common, "server": server} for name, server in props.servers.items()}


def group_attributes(members: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The group's attributes from its members' (by server name): deploy_stdouts,
    deploy_stderrs, deploy_status_codes, and every other attribute as a map too. Pure."""
    out: dict[str, Any] = {
        "deploy_stdouts": {n: a.get("deploy_stdout") for n, a in members.items()},
        "deploy_stderrs": {n: a.get("deploy_stderr") for n, a in members.items()},
        "deploy_status_codes": {n: a.get("deploy_status_code") for n, a in members.items()},
    }
    for key in dict.fromkeys(k for a in members.values() for k in a):
        out.setdefault(key, {n: a.get(key) for n, a in members.items()})
    return out


class GroupAttributeNames(DeploymentAttributes):
    _named = {
        "deploy_stdouts": "A map of server name -> captured stdout of the configuration execution.",
        "deploy_stderrs": "A map of server name -> captured stderr of the configuration execution.",
        "deploy_status_codes": "A map of server name -> returned status code of the configuration execution.",
    }

    def __getitem__(self, name: str) -> str:
        return self._named.get(name, "A map of server name -> that output of its deployment.")


class SoftwareDeploymentGroup(ResourceType):
    type_name = "OS::Heat::SoftwareDeploymentGroup"
    description = "Runs one software config on many servers: a nested stack of one deployment per server."
    properties = SoftwareDeploymentGroupProperties
    attributes = GroupAttributeNames()
    attribute_types = dict.fromkeys(("deploy_stdouts", "deploy_stderrs", "deploy_status_codes"), "Map")
    support_version = "5.0.0"

    def _refuse(self) -> PermanentError:
        return PermanentError(f"{self.type_name} is run by the engine as a nested stack, not by a worker")

    async def create(self, ctx: ActionContext, props: Properties) -> ActionResult:
        raise self._refuse()

    async def delete(self, ctx: ActionContext, physical_id: str, props: Properties) -> ActionResult:
        raise self._refuse()


class StructuredDeploymentGroup(SoftwareDeploymentGroup):
    type_name = "OS::Heat::StructuredDeploymentGroup"
    description = "Runs one structured config on many servers, its get_input references replaced."
    properties = StructuredDeploymentGroupProperties
