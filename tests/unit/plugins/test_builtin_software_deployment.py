"""OS::Heat::SoftwareDeployment / StructuredDeployment and their groups, the pure parts: the
derived config a server runs, what an agent's signal means, a group's members and
attributes. Nothing faked; no engine."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from shared.errors import InvalidInput, PermanentError
from shared.plugins.builtin.software_deployment import (
    DeployContext,
    SoftwareDeploymentGroupProperties,
    SoftwareDeploymentProperties,
    StructuredDeploymentProperties,
    derived_config,
    group_attributes,
    group_members,
    signal_outcome,
)

SOURCE: dict[str, Any] = {
    "config": "echo $who",
    "inputs": [{"name": "who", "type": "String", "default": "world"}, {"name": "n", "default": 1}],
    "outputs": [{"name": "result"}, {"name": "broken", "error_output": True}],
    "options": {"debug": True},
}
DEPLOY = DeployContext("server-1", "CREATE", "web/1234", "deploy", "HEAT_SIGNAL")


def values(config: dict[str, Any]) -> dict[str, Any]:
    return {i["name"]: i["value"] for i in config["inputs"]}


def test_the_derived_config_gives_each_input_its_value_or_default_and_heats_deploy_inputs() -> None:
    props = SoftwareDeploymentProperties(server="server-1", input_values={"who": "alice", "extra": 5})
    derived = derived_config(SOURCE, props, DEPLOY)
    assert values(derived) == {
        "who": "alice",
        "n": 1,
        "extra": 5,
        "deploy_server_id": "server-1",
        "deploy_action": "CREATE",
        "deploy_stack_id": "web/1234",
        "deploy_resource_name": "deploy",
        "deploy_signal_transport": "HEAT_SIGNAL",
    }
    assert (derived["config"], derived["outputs"], derived["options"]) == (
        "echo $who",
        SOURCE["outputs"],
        {"debug": True},
    )


def test_a_temp_url_deployment_gives_its_signal_url_and_verb_and_no_input_overrides_them() -> None:
    url = "http://converge:8004/v1/p/software_deployments/d/signal/token"
    props = SoftwareDeploymentProperties(
        server="server-1",
        signal_transport="TEMP_URL_SIGNAL",
        input_values={"deploy_signal_id": "http://elsewhere/", "deploy_action": "FAKE", "who": "a"},
    )
    deploy = DeployContext("server-1", "DELETE", "web/1234", "deploy", "TEMP_URL_SIGNAL", url)
    derived = derived_config(SOURCE, props, deploy)
    names = [i["name"] for i in derived["inputs"]]
    assert len(names) == len(set(names)), "each deploy_* input once: the engine's"
    given = values(derived)
    assert (given["deploy_signal_id"], given["deploy_signal_verb"]) == (url, "PUT")
    assert (given["deploy_action"], given["deploy_signal_transport"]) == ("DELETE", "TEMP_URL_SIGNAL")


@pytest.mark.parametrize("transport", ["CFN_SIGNAL", "ZAQAR_SIGNAL", "SMOKE_SIGNAL"])
def test_a_transport_converge_does_not_offer_is_refused_naming_the_property(transport: str) -> None:
    with pytest.raises(ValidationError) as caught:
        SoftwareDeploymentProperties(server="s", signal_transport=transport)
    [error] = caught.value.errors()
    assert error["loc"] == ("signal_transport",)
    if transport != "SMOKE_SIGNAL":
        assert f"{transport} is not supported by Converge" in error["msg"]


def test_a_structured_deployment_substitutes_its_input_references() -> None:
    source = {"config": {"greet": {"get_input": "who"}, "list": [{"get_input": "deploy_action"}]}}
    props = StructuredDeploymentProperties(server="s", input_values={"who": "bob"})
    assert derived_config(source, props, DEPLOY)["config"] == {"greet": "bob", "list": ["CREATE"]}
    lax = derived_config({"config": {"x": {"get_input": "nobody"}}}, props, DEPLOY)
    assert lax["config"] == {"x": None}
    strict = StructuredDeploymentProperties(server="s", input_values_validate="STRICT")
    with pytest.raises(PermanentError, match="nobody"):
        derived_config({"config": {"x": {"get_input": "nobody"}}}, strict, DEPLOY)


def test_a_signal_with_status_code_zero_completes_with_the_declared_outputs_only() -> None:
    outcome = signal_outcome(
        {"deploy_stdout": "ok", "deploy_status_code": 0, "result": "42", "noise": "x"}, SOURCE["outputs"]
    )
    assert outcome.ok
    assert outcome.output_values == {"deploy_stdout": "ok", "deploy_status_code": 0, "result": "42"}


def test_a_non_zero_status_code_or_an_error_output_fails_naming_why() -> None:
    failed = signal_outcome({"deploy_status_code": "2", "deploy_stderr": "disk full"}, [])
    assert not failed.ok
    assert failed.reason == "Deployment exited with non-zero status code: 2: disk full"
    broken = signal_outcome({"broken": "it is"}, SOURCE["outputs"])
    assert (broken.ok, broken.reason) == (False, "Deployment failed: broken: it is")
    with pytest.raises(InvalidInput, match="deploy_status_code"):
        signal_outcome({"deploy_status_code": "many"}, [])


def test_a_deployment_group_has_one_member_per_server_and_maps_their_attributes() -> None:
    group = SoftwareDeploymentGroupProperties(
        config="c", servers={"web": "s-1", "db": "s-2"}, input_values={"who": "x"}
    )
    members = group_members(group)
    assert sorted(members) == ["db", "web"]
    assert members["web"]["server"] == "s-1"
    assert members["db"] == {**members["web"], "server": "s-2"}
    assert "servers" not in members["web"]
    SoftwareDeploymentProperties.model_validate(members["web"])  # each is a valid deployment
    attributes = group_attributes(
        {"web": {"deploy_stdout": "a", "deploy_status_code": 0, "result": 1}, "db": {"deploy_stdout": "b"}}
    )
    assert attributes == {
        "deploy_stdouts": {"web": "a", "db": "b"},
        "deploy_stderrs": {"web": None, "db": None},
        "deploy_status_codes": {"web": 0, "db": None},
        "deploy_stdout": {"web": "a", "db": "b"},
        "deploy_status_code": {"web": 0, "db": None},
        "result": {"web": 1, "db": None},
    }
