"""Heat's `restricted_actions` decisions and a ResourceGroup's `update_policy` batches
(`batch_create`, `rolling_update`), pure: which action an environment forbids, how the
members are cut into batches and ordered in the child template, and the pause gate."""

from __future__ import annotations

from typing import Any

import pytest

from services.engine.core.child_goals import child_goal
from services.engine.core.decide import Forward, restricted_action, restricted_failure
from services.engine.core.gates import PAUSE, forward_gates
from services.engine.core.groups import batches
from services.engine.core.model import Action
from services.engine.core.nesting import NestedInvalid, child_environment
from services.engine.template import parse_environment
from services.engine.template.environment import BATCH_PAUSE_SECTION
from services.engine.template.errors import TemplateInvalid

MEMBERS = ("0", "1", "2", "3", "4")


def test_update_restricted_allows_a_replacement_and_replace_restricted_an_update() -> None:
    assert restricted_action(Forward.UPDATE, {"update"}) == "update"
    assert restricted_action(Forward.REPLACE, {"update"}) is None
    assert restricted_action(Forward.REPLACE, {"replace"}) == "replace"
    assert restricted_action(Forward.UPDATE, {"replace"}) is None
    assert restricted_action(Forward.NOTHING, {"update", "replace"}) is None
    assert restricted_action(Forward.CREATE, {"update", "replace"}) is None
    assert restricted_failure("db", "update") == (
        "Resource UPDATE failed: ResourceActionRestricted: resources.db: update is restricted for resource."
    )


def test_restricted_actions_match_resource_names_and_patterns_and_bad_ones_are_refused() -> None:
    env = parse_environment(
        {
            "resource_registry": {
                "resources": {
                    "db*": {"restricted_actions": "update"},
                    "db_main": {"restricted_actions": ["replace"], "hooks": "pre-update"},
                }
            }
        }
    )
    assert env.restricted_actions_for("db_main") == {"update", "replace"}
    assert env.restricted_actions_for("db2") == {"update"}
    assert env.restricted_actions_for("web") == frozenset()
    with pytest.raises(TemplateInvalid) as refused:
        parse_environment({"resource_registry": {"resources": {"x": {"restricted_actions": ["delete"]}}}})
    assert (
        "environment.resource_registry.resources.x.restricted_actions: invalid restricted action 'delete'"
        in str(refused.value)
    )


def test_batch_create_cuts_the_members_into_batches_only_when_the_child_is_created() -> None:
    policy = {"batch_create": {"max_batch_size": 2, "pause_time": 3}}
    assert batches(policy, MEMBERS, creating=True) == ((("0", "1"), ("2", "3"), ("4",)), 3.0)
    assert batches(policy, MEMBERS, creating=False) == ((MEMBERS,), 0.0)
    assert batches({}, MEMBERS, creating=True) == ((MEMBERS,), 0.0)


def test_rolling_update_leaves_min_in_service_out_of_each_batch_but_updates_at_least_one() -> None:
    policy: dict[str, Any] = {"rolling_update": {"max_batch_size": 3, "min_in_service": 3}}
    assert batches(policy, MEMBERS, creating=False) == ((("0", "1"), ("2", "3"), ("4",)), 0.0)
    policy = {"rolling_update": {"max_batch_size": 3, "min_in_service": 9, "pause_time": 1.5}}
    assert batches(policy, MEMBERS[:2], creating=False) == ((("0",), ("1",)), 1.5)
    assert batches(policy, MEMBERS, creating=True) == ((MEMBERS,), 0.0)


def test_a_policy_that_is_not_a_groups_is_refused() -> None:
    with pytest.raises(NestedInvalid, match=r"update_policy\.rolling_update\.max_batch_size"):
        batches({"rolling_update": {"max_batch_size": 0}}, MEMBERS, creating=False)
    with pytest.raises(NestedInvalid, match=r"update_policy\.surge"):
        batches({"surge": {}}, MEMBERS, creating=False)


def test_the_child_template_orders_each_batch_after_the_one_before_and_says_who_pauses() -> None:
    props = {"count": 3, "resource_def": {"type": "OS::Heat::None"}}
    facade = {"update_policy": {"batch_create": {"max_batch_size": 2, "pause_time": 4}}}
    goal = child_goal(
        "OS::Heat::ResourceGroup",
        props,
        environment={},
        files={},
        timeout_mins=None,
        facade=facade,
        creating=True,
    )
    assert isinstance(goal.template, dict)
    resources = goal.template["resources"]
    assert [resources[n].get("depends_on") for n in ("0", "1", "2")] == [None, None, ["0", "1"]]
    assert goal.environment[BATCH_PAUSE_SECTION] == {"seconds": 4.0, "members": ["2"]}
    env = parse_environment(goal.environment)
    assert (env.pause_before("2"), env.pause_before("0")) == (4.0, 0.0)
    updated = child_goal(
        "OS::Heat::ResourceGroup", props, environment={}, files={}, timeout_mins=None, facade=facade
    )
    assert isinstance(updated.template, dict)
    assert not any("depends_on" in r for r in updated.template["resources"].values())
    assert BATCH_PAUSE_SECTION not in updated.environment


def test_a_member_of_a_later_batch_pauses_first_only_when_it_has_something_to_do() -> None:
    def gates(decision: Forward) -> tuple[str, ...]:
        return forward_gates(
            stack_action=Action.UPDATE,
            decision=decision,
            exists=True,
            external=False,
            hooks=("pre-update",),
            converge=False,
            observable=True,
            pause=True,
        )

    assert gates(Forward.UPDATE) == (PAUSE, "pre-update")
    assert gates(Forward.NOTHING) == ("pre-update",)


def test_restricted_actions_in_a_nested_section_reach_the_child_stacks_resources() -> None:
    section = {"resources": {"app*": {"db": {"restricted_actions": ["replace"]}}}}
    child = parse_environment(child_environment({"resource_registry": section}, "app1"))
    assert child.restricted_actions_for("db") == {"replace"}
    assert child.restricted_actions_for("web") == frozenset()
