"""A resource's summary for the dashboard, decided from its row alone
(`services.engine.api.summaries`): which types add what, and a group's sizes from
the properties it was last given and the state its child last reported."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from services.engine.api.summaries import deployment_id, deployment_summary, group_size, kind_of
from services.engine.core.nesting import SCALING_STATE_OUTPUT
from services.engine.store.software_records import DeploymentRecord

ASG, GROUP = "OS::Heat::AutoScalingGroup", "OS::Heat::ResourceGroup"


def test_each_type_that_adds_to_its_view_is_recognised_and_others_add_nothing() -> None:
    assert kind_of("OS::Heat::SoftwareDeployment") == "deployment"
    assert kind_of("OS::Heat::StructuredDeployment") == "deployment"
    assert kind_of("OS::Heat::SoftwareDeploymentGroup") == "deployment_group"
    assert kind_of("OS::Heat::StructuredDeploymentGroup") == "deployment_group"
    assert kind_of(ASG) == "autoscaling_group"
    assert kind_of(GROUP) == "resource_group"
    assert kind_of("Sandbox::Server") == "resource"


def test_an_autoscaling_group_converges_to_the_size_its_last_signal_decided() -> None:
    state = {"members": ["a", "b"], "next_index": 2, "desired": 2, "size": 3}
    sizes = group_size(
        ASG,
        {"min_size": 1, "max_size": 5, "desired_capacity": 2},
        {"current_size": 2, SCALING_STATE_OUTPUT: state},
    )
    assert (sizes.current_size, sizes.desired_size, sizes.min_size, sizes.max_size) == (2, 3, 1, 5)
    assert sizes.desired_capacity == 2


def test_a_group_not_created_yet_aims_at_its_desired_capacity_or_else_its_minimum() -> None:
    assert group_size(ASG, {"min_size": 2, "max_size": 4}, {}).desired_size == 2
    given = group_size(ASG, {"min_size": 2, "max_size": 4, "desired_capacity": 3}, {})
    assert (given.current_size, given.desired_size) == (0, 3)


def test_a_resource_group_counts_its_members_and_aims_at_its_count() -> None:
    sizes = group_size(GROUP, {"count": 3}, {"refs": ["x", "y"]})
    assert (sizes.current_size, sizes.desired_size, sizes.count) == (2, 3, 3)


def test_a_deployment_is_shown_as_its_agent_left_it_and_a_missing_one_as_not_written() -> None:
    ident = uuid.uuid4()
    record = DeploymentRecord(
        deployment_id=ident,
        project_id="p",
        server_id="srv",
        config_id=uuid.uuid4(),
        input_values={},
        output_values={"deploy_stderr": "boom", "deploy_status_code": 3},
        action="UPDATE",
        status="FAILED",
        status_reason="exit 3",
        stack_id=None,
        resource_name="deploy",
        created_at=datetime.now(UTC),
        updated_at=None,
    )
    shown = deployment_summary("deploy", record)
    assert (shown.id, shown.status, shown.action, shown.status_reason) == (
        str(ident),
        "FAILED",
        "UPDATE",
        "exit 3",
    )
    assert shown.outputs == {"deploy_stderr": "boom", "deploy_status_code": 3}
    assert deployment_summary("deploy", None).id is None
    assert deployment_id(str(ident)) == ident
    assert deployment_id(None) is None
    assert deployment_id("not-a-uuid") is None
