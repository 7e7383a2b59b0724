"""The scenario library: a template, an operation, a check that reality matches.

Each scenario is a plain function of a `Harness` (tests/support/harness.py):
the in-process harness runs them under many seeds of delivery disorder, the
distributed one through RabbitMQ with every service as its own process.
After each operation the world must hold exactly one live real resource per
template resource, with the right properties, and nothing left over.
"""

from __future__ import annotations

from typing import Any

from tests.support.harness import Harness, WorldView
from tests.support.waiting import eventually


def hot(resources: dict[str, Any], **sections: Any) -> dict[str, Any]:
    return {"heat_template_version": "2018-08-31", "resources": resources, **sections}


def thing(**props: Any) -> dict[str, Any]:
    return {"type": "Test::Thing", "properties": props}


def assert_world_matches(world: WorldView, expected: dict[str, dict[str, Any]]) -> None:
    """Exactly one live real resource per template resource, with these properties; nothing else."""
    live = world.by_name()
    assert sorted(live) == sorted(expected), f"live: {sorted(live)}"
    for name, props in expected.items():
        assert len(live[name]) == 1, f"{name} exists {len(live[name])} times"
        actual = live[name][0].properties
        for key, value in props.items():
            assert actual.get(key) == value, f"{name}.{key}: {actual.get(key)!r} != {value!r}"


CHAIN = hot(
    {
        "a": thing(value="A"),
        "b": thing(value={"get_attr": ["a", "value"]}, ref={"get_resource": "a"}),
        "c": thing(value={"list_join": ["-", [{"get_attr": ["b", "value"]}, "c"]]}),
    }
)


async def create_a_chain_passes_references_and_attributes_along(cv: Harness) -> None:
    stack = await cv.create("chain", CHAIN)
    assert await cv.settled(stack) == ("CREATE", "COMPLETE", "Stack CREATE completed successfully")
    a = cv.world.by_name()["a"][0]
    assert_world_matches(
        cv.world, {"a": {"value": "A"}, "b": {"value": "A", "ref": a.physical_id}, "c": {"value": "A-c"}}
    )
    assert cv.world.created == 3


async def diamond_and_fan_in_wait_for_every_predecessor(cv: Harness) -> None:
    template = hot(
        {
            "top": thing(value="t"),
            "left": thing(value={"get_attr": ["top", "value"]}),
            "right": thing(value={"get_attr": ["top", "value"]}),
            "solo": thing(value="s"),
            "bottom": thing(
                value={"list_join": [",", [{"get_attr": [n, "value"]} for n in ("left", "right", "solo")]]}
            ),
        }
    )
    stack = await cv.create("diamond", template)
    assert (await cv.settled(stack))[1] == "COMPLETE"
    assert cv.world.by_name()["bottom"][0].properties["value"] == "t,t,s"
    assert cv.world.created == 5


async def update_adds_removes_and_changes_resources(cv: Harness) -> None:
    stack = await cv.create("s", CHAIN)
    await cv.settled(stack)
    ids = {n: r[0].physical_id for n, r in cv.world.by_name().items()}
    new = hot(
        {
            "a": thing(value="A2"),
            "b": thing(value={"get_attr": ["a", "value"]}),
            "d": thing(value="new"),
        }
    )
    await cv.update(stack, new)
    assert await cv.settled(stack) == ("UPDATE", "COMPLETE", "Stack UPDATE completed successfully")
    assert_world_matches(cv.world, {"a": {"value": "A2"}, "b": {"value": "A2"}, "d": {"value": "new"}})
    assert cv.world.by_name()["a"][0].physical_id == ids["a"], "in-place update keeps the resource"
    rows = await cv.rows(stack)
    assert sorted(r["name"] for r in rows) == ["a", "b", "d"]


async def an_unchanged_resource_issues_no_job(cv: Harness) -> None:
    stack = await cv.create("s", CHAIN)
    await cv.settled(stack)
    before = len(await cv.events(stack))
    await cv.update(stack, CHAIN)
    assert (await cv.settled(stack))[1] == "COMPLETE"
    events = (await cv.events(stack))[before:]
    assert [e["resource_type"] for e in events] == ["OS::Heat::Stack"] * 2, "only the stack's own events"


async def replacement_creates_the_new_resource_first_and_moves_dependents(cv: Harness) -> None:
    template = hot(
        {
            "base": thing(size=1, value="v"),
            "user": thing(ref={"get_resource": "base"}, value={"get_attr": ["base", "size"]}),
        }
    )
    stack = await cv.create("s", template)
    await cv.settled(stack)
    old_base = cv.world.by_name()["base"][0].physical_id
    template["resources"]["base"]["properties"]["size"] = 2
    await cv.update(stack, template)
    assert (await cv.settled(stack))[1] == "COMPLETE"
    new_base = cv.world.by_name()["base"][0].physical_id
    assert new_base != old_base
    assert_world_matches(cv.world, {"base": {"size": 2}, "user": {"ref": new_base}})
    assert len(await cv.rows(stack)) == 2, "the replaced row is cleaned up"


async def dependency_inversion_between_templates_cleans_up_safely(cv: Harness) -> None:
    first = hot({"x": thing(value="x"), "y": thing(ref={"get_resource": "x"})})
    second = hot({"y": thing(value="y", size=5), "x": thing(ref={"get_resource": "y"}, size=7)})
    stack = await cv.create("s", first)
    await cv.settled(stack)
    await cv.update(stack, second)
    assert (await cv.settled(stack))[1] == "COMPLETE"
    y = cv.world.by_name()["y"][0].physical_id
    assert_world_matches(cv.world, {"y": {"size": 5}, "x": {"ref": y, "size": 7}})


async def a_failed_create_fails_the_stack_with_the_reason(cv: Harness) -> None:
    template = hot({"ok": thing(value="1"), "bad": thing(fail=True)})
    stack = await cv.create("s", template)
    action, status, reason = await cv.settled(stack)
    assert (action, status) == ("CREATE", "FAILED")
    assert reason.startswith("Resource CREATE failed: ")
    assert "bad was told to fail" in reason


async def a_failed_update_fails_the_stack(cv: Harness) -> None:
    stack = await cv.create("s", hot({"a": thing(value="1")}))
    await cv.settled(stack)
    await cv.update(stack, hot({"a": thing(value="2", fail=True)}))
    action, status, reason = await cv.settled(stack)
    assert (action, status) == ("UPDATE", "FAILED")
    assert "Resource UPDATE failed" in reason
    assert_world_matches(cv.world, {"a": {"value": "1"}})


async def delete_of_a_complete_stack_leaves_nothing(cv: Harness) -> None:
    stack = await cv.create("s", CHAIN)
    await cv.settled(stack)
    await cv.delete(stack)
    assert await cv.settled(stack) == ("DELETE", "COMPLETE", "Stack DELETE completed successfully")
    assert cv.world.live == {}
    assert await cv.rows(stack) == []


async def delete_of_a_partially_created_stack_leaves_nothing(cv: Harness) -> None:
    template = hot({"a": thing(value="1"), "b": thing(ref={"get_resource": "a"}, fail=True), "c": thing()})
    stack = await cv.create("s", template)
    assert (await cv.settled(stack))[1] == "FAILED"
    await cv.delete(stack)
    assert (await cv.settled(stack))[1] == "COMPLETE"
    assert cv.world.live == {}


async def asynchronous_actions_are_finished_by_an_observer(cv: Harness) -> None:
    """TestResource waits: the worker reports 'in progress', an observer the end."""
    waits = {"create": 0.1, "update": 0.1, "delete": 0.1}
    template = hot(
        {
            "slow": {
                "type": "OS::Heat::TestResource",
                "properties": {"value": "s", "action_wait_secs": waits},
            },
            "after": thing(value={"get_attr": ["slow", "output"]}),
        }
    )
    stack = await cv.create("s", template)
    assert await cv.settled(stack) == ("CREATE", "COMPLETE", "Stack CREATE completed successfully")
    assert_world_matches(cv.world, {"after": {"value": "s"}})
    template["resources"]["slow"]["properties"]["value"] = "t"
    await cv.update(stack, template)
    assert (await cv.settled(stack))[1] == "COMPLETE"
    assert_world_matches(cv.world, {"after": {"value": "t"}})
    await cv.delete(stack)
    assert (await cv.settled(stack))[1] == "COMPLETE"
    assert await cv.rows(stack) == []


async def retained_resources_stay_and_external_ids_are_adopted(cv: Harness) -> None:
    """A retained resource outlives its stack and is adopted by another through external_id."""
    stack = await cv.create("s", hot({"keep": {**thing(value="k"), "deletion_policy": "Retain"}}))
    await cv.settled(stack)
    kept = cv.world.by_name()["keep"][0].physical_id
    other = await cv.create(
        "t",
        hot(
            {
                "adopted": {**thing(value="k"), "external_id": kept},
                "user": thing(ref={"get_resource": "adopted"}),
            }
        ),
    )
    assert (await cv.settled(other))[1] == "COMPLETE"
    await cv.delete(stack)
    assert (await cv.settled(stack))[1] == "COMPLETE"
    assert kept in cv.world.live, "Retain keeps the real resource when its stack is deleted"
    assert cv.world.by_name()["user"][0].properties["ref"] == kept
    assert cv.world.created == 2


SCENARIOS = [
    create_a_chain_passes_references_and_attributes_along,
    diamond_and_fan_in_wait_for_every_predecessor,
    update_adds_removes_and_changes_resources,
    an_unchanged_resource_issues_no_job,
    replacement_creates_the_new_resource_first_and_moves_dependents,
    dependency_inversion_between_templates_cleans_up_safely,
    a_failed_create_fails_the_stack_with_the_reason,
    a_failed_update_fails_the_stack,
    delete_of_a_complete_stack_leaves_nothing,
    delete_of_a_partially_created_stack_leaves_nothing,
    asynchronous_actions_are_finished_by_an_observer,
    retained_resources_stay_and_external_ids_are_adopted,
]


def slow(value: str, *, seconds: float = 0.15, **extra: Any) -> dict[str, Any]:
    """A TestResource whose create/update/delete each take `seconds` (an observer finishes them)."""
    waits = {"create": seconds, "update": seconds, "delete": seconds}
    return {
        "type": "OS::Heat::TestResource",
        "properties": {"value": value, "action_wait_secs": waits, **extra},
    }


async def an_update_during_a_create_takes_over_and_creates_nothing_twice(cv: Harness) -> None:
    first = hot({"s1": slow("a"), "s2": slow("a"), "t": thing(value={"get_attr": ["s1", "output"]})})
    stack = await cv.create("s", first)
    second = hot({"s1": slow("b"), "u": thing(value={"get_attr": ["s1", "output"]})})
    await cv.update(stack, second)
    assert await cv.settled(stack) == ("UPDATE", "COMPLETE", "Stack UPDATE completed successfully")
    assert_world_matches(cv.world, {"u": {"value": "b"}})
    assert sorted(r["name"] for r in await cv.rows(stack)) == ["s1", "u"]


async def three_updates_in_quick_succession_end_in_the_last(cv: Harness) -> None:
    stack = await cv.create("s", hot({"s": slow("0"), "t": thing(value={"get_attr": ["s", "output"]})}))
    await cv.settled(stack)
    for value in ("1", "2", "3"):
        await cv.update(stack, hot({"s": slow(value), "t": thing(value={"get_attr": ["s", "output"]})}))
    assert (await cv.settled(stack))[:2] == ("UPDATE", "COMPLETE")
    assert_world_matches(cv.world, {"t": {"value": "3"}})
    assert cv.world.created == 1


async def a_delete_during_a_create_leaves_nothing(cv: Harness) -> None:
    stack = await cv.create("s", hot({"s": slow("a"), "t": thing(ref={"get_resource": "s"}), "x": thing()}))
    await cv.delete(stack)
    assert (await cv.settled(stack))[:2] == ("DELETE", "COMPLETE")
    assert cv.world.live == {}
    assert await cv.rows(stack) == []


async def an_update_inverting_dependencies_preempts_a_running_update(cv: Harness) -> None:
    stack = await cv.create(
        "s", hot({"x": thing(value="x"), "y": thing(ref={"get_resource": "x"}), "w": slow("0")})
    )
    await cv.settled(stack)
    await cv.update(
        stack, hot({"x": thing(value="x2"), "y": thing(ref={"get_resource": "x"}), "w": slow("1")})
    )
    inverted = hot(
        {"y": thing(value="y", size=3), "x": thing(ref={"get_resource": "y"}, size=4), "w": slow("2")}
    )
    await cv.update(stack, inverted)
    assert (await cv.settled(stack))[:2] == ("UPDATE", "COMPLETE")
    y = cv.world.by_name()["y"][0].physical_id
    assert_world_matches(cv.world, {"y": {"size": 3}, "x": {"ref": y, "size": 4}})


SCENARIOS += [
    an_update_during_a_create_takes_over_and_creates_nothing_twice,
    three_updates_in_quick_succession_end_in_the_last,
    a_delete_during_a_create_leaves_nothing,
    an_update_inverting_dependencies_preempts_a_running_update,
]


async def a_failed_update_rolls_back_to_the_previous_template(cv: Harness) -> None:
    stack = await cv.create("s", hot({"a": thing(value="1"), "b": thing(value="b")}), rollback=True)
    await cv.settled(stack)
    broken = hot(
        {"a": thing(value="2"), "c": thing(value="new"), "bad": thing(fail=True, ref={"get_resource": "c"})}
    )
    await cv.update(stack, broken)
    action, status, reason = await cv.settled(stack)
    assert (action, status) == ("ROLLBACK", "COMPLETE"), reason
    assert_world_matches(cv.world, {"a": {"value": "1"}, "b": {"value": "b"}})
    statuses = [
        (e["action"], e["status"]) for e in await cv.events(stack) if e["resource_type"] == "OS::Heat::Stack"
    ]
    assert statuses[-3:] == [("UPDATE", "FAILED"), ("ROLLBACK", "IN_PROGRESS"), ("ROLLBACK", "COMPLETE")]


async def a_failed_create_rolls_back_by_deleting_what_it_built(cv: Harness) -> None:
    template = hot({"a": thing(value="1"), "bad": thing(fail=True, ref={"get_resource": "a"})})
    stack = await cv.create("s", template, rollback=True)
    assert (await cv.settled(stack))[:2] == ("ROLLBACK", "COMPLETE")
    assert cv.world.live == {}


async def rolling_back_a_replacement_restores_the_original_not_a_third_copy(cv: Harness) -> None:
    first = hot({"base": thing(size=1), "user": thing(ref={"get_resource": "base"})})
    stack = await cv.create("s", first, rollback=True)
    await cv.settled(stack)
    original = cv.world.by_name()["base"][0].physical_id
    broken = hot(
        {
            "base": thing(size=2),
            "bad": thing(fail=True, value={"get_attr": ["base", "size"]}),
            # user waits for bad, so the original cannot be cleaned up before the failure
            "user": {**thing(ref={"get_resource": "base"}), "depends_on": ["bad"]},
        }
    )
    await cv.update(stack, broken)
    assert (await cv.settled(stack))[:2] == ("ROLLBACK", "COMPLETE")
    assert_world_matches(cv.world, {"base": {"size": 1}, "user": {"ref": original}})
    assert cv.world.by_name()["base"][0].physical_id == original
    assert cv.world.created == 3, "the two originals and one replacement, later deleted"
    await cv.update(
        stack, hot({"base": thing(size=1, value="v"), "user": thing(ref={"get_resource": "base"})})
    )
    assert (await cv.settled(stack))[:2] == ("UPDATE", "COMPLETE")
    assert cv.world.by_name()["base"][0].physical_id == original, (
        "later updates of the original apply in place"
    )


async def cancel_update_rolls_back_and_cancel_without_rollback_stops(cv: Harness) -> None:
    stack = await cv.create("s", hot({"s": slow("0"), "t": thing(value={"get_attr": ["s", "output"]})}))
    await cv.settled(stack)
    await cv.update(
        stack, hot({"s": slow("1", seconds=1.0), "t": thing(value={"get_attr": ["s", "output"]})})
    )
    await cv.cancel(stack, rollback=True)
    assert (await cv.settled(stack))[:2] == ("ROLLBACK", "COMPLETE")
    assert_world_matches(cv.world, {"t": {"value": "0"}})
    await cv.update(
        stack, hot({"s": slow("2", seconds=1.0), "t": thing(value={"get_attr": ["s", "output"]})})
    )
    await cv.cancel(stack, rollback=False)
    action, status, reason = await cv.settled(stack)
    assert (action, status, reason) == ("UPDATE", "FAILED", "Stack UPDATE cancelled")


async def a_rollback_interrupted_by_a_new_update_ends_in_that_update(cv: Harness) -> None:
    stack = await cv.create("s", hot({"a": thing(value="1")}), rollback=True)
    await cv.settled(stack)
    await cv.update(stack, hot({"a": thing(value="2"), "w": slow("w", seconds=0.5), "bad": thing(fail=True)}))

    async def rolling_back() -> bool:
        return await cv.state(stack) == ("ROLLBACK", "IN_PROGRESS")

    await eventually(rolling_back, every=0.01)
    await cv.update(stack, hot({"a": thing(value="3"), "z": thing(value="z")}))
    assert (await cv.settled(stack))[:2] == ("UPDATE", "COMPLETE")
    assert_world_matches(cv.world, {"a": {"value": "3"}, "z": {"value": "z"}})


SCENARIOS += [
    a_failed_update_rolls_back_to_the_previous_template,
    a_failed_create_rolls_back_by_deleting_what_it_built,
    rolling_back_a_replacement_restores_the_original_not_a_third_copy,
    cancel_update_rolls_back_and_cancel_without_rollback_stops,
    a_rollback_interrupted_by_a_new_update_ends_in_that_update,
]


async def an_operation_past_its_timeout_fails_naming_what_is_still_running_and_rolls_back(
    cv: Harness,
) -> None:
    stack = await cv.create("s", hot({"a": thing(value="1")}), rollback=True, timeout_mins=1)
    await cv.settled(stack)
    stuck = {"type": "OS::Heat::TestResource", "properties": {"action_wait_secs": {"create": 600}}}
    await cv.update(stack, hot({"a": thing(value="2"), "stuck": stuck}))

    async def stuck_in_progress() -> bool:
        # `a`'s update done first: a timeout while an update of a real resource is still
        # in flight races that update with the rollback's (a known limit, not this test's)
        rows = {r["name"]: r for r in await cv.rows(stack)}
        return (
            "stuck" in rows
            and rows["stuck"]["status"] == "IN_PROGRESS"
            and rows["stuck"]["physical_id"] is not None
            and (rows["a"]["action"], rows["a"]["status"]) == ("UPDATE", "COMPLETE")
        )

    await eventually(stuck_in_progress, every=0.01)
    await cv.time_passes(0)
    assert await cv.state(stack) == ("UPDATE", "IN_PROGRESS"), "not yet overdue"
    await cv.time_passes(120)
    assert (await cv.settled(stack))[:2] == ("ROLLBACK", "COMPLETE")
    assert_world_matches(cv.world, {"a": {"value": "1"}})
    assert sorted(r["name"] for r in await cv.rows(stack)) == ["a"], "the stuck resource was deleted"
    failed = [e for e in await cv.events(stack) if (e["action"], e["status"]) == ("UPDATE", "FAILED")]
    assert "timed out; still in progress: " in failed[-1]["reason"]
    assert "stuck" in failed[-1]["reason"].split("still in progress: ")[1]


SCENARIOS += [an_operation_past_its_timeout_fails_naming_what_is_still_running_and_rolls_back]
