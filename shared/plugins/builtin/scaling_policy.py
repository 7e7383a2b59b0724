"""OS::Heat::ScalingPolicy: a URL that resizes an OS::Heat::AutoScalingGroup.

Where it sits: the worker creates the policy (its token and URLs, as a
wait-condition handle's: `signal_url` is Converge's resource-signal URL,
signalled with the policy's token in `X-Auth-Token` or with a project token;
a change of its properties replaces it, with a new token);
the engine takes its signals (`services.engine.scaling`), decides the group's
new size (`services.engine.core.scaling`) and updates the group's child stack.
"""

from __future__ import annotations

from typing import Literal

from shared.plugins.base import ActionContext, ActionResult, Properties, ResourceType, prop
from shared.plugins.builtin.common import KeyedRandom, as_props, physical_name
from shared.plugins.builtin.wait_condition import curl_cli, signal_endpoint


class ScalingPolicyProperties(Properties):
    auto_scaling_group_id: str = prop(
        description="The group to scale: its reference id (get_resource of an OS::Heat::AutoScalingGroup)."
    )
    adjustment_type: Literal["change_in_capacity", "exact_capacity", "percent_change_in_capacity"] = prop(
        description="How scaling_adjustment is applied to the group's size."
    )
    scaling_adjustment: float = prop(description="The size change (or the size, for exact_capacity).")
    min_adjustment_step: int | None = prop(
        None, ge=0, description="For percent_change_in_capacity: change the size by at least this much."
    )
    cooldown: int | None = prop(
        None, description="Seconds after a scaling during which this policy does nothing."
    )


class ScalingPolicy(ResourceType):
    type_name = "OS::Heat::ScalingPolicy"
    description = "Resizes an OS::Heat::AutoScalingGroup when its signal_url (or alarm_url) is signalled."
    properties = ScalingPolicyProperties
    attributes = {
        "signal_url": "URL that scales the group (POST, with the policy's token in X-Auth-Token).",
        "alarm_url": "The same URL, for alarms (POST, with the policy's token in X-Auth-Token).",
        "token": "The policy's own token for signalling it.",
        "curl_cli": "curl command signalling the policy.",
    }
    attribute_types = dict.fromkeys(("signal_url", "alarm_url", "token", "curl_cli"), "String")
    support_version = "2014.1"

    async def create(self, ctx: ActionContext, props: Properties) -> ActionResult:
        as_props(props, ScalingPolicyProperties)
        endpoint = signal_endpoint(ctx)
        token = KeyedRandom(ctx.idempotency_key, "signal-token").hex(24)
        attributes = {
            "signal_url": endpoint,
            "alarm_url": endpoint,
            "token": token,
            "curl_cli": curl_cli(endpoint, token),
        }
        return ActionResult(physical_name(ctx), attributes=attributes)

    async def delete(self, ctx: ActionContext, physical_id: str, props: Properties) -> ActionResult:
        return ActionResult(physical_id)
