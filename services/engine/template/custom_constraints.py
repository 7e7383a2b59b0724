"""Custom constraints: what a parameter's `custom_constraint: <name>` does to its value.

Where it sits: `stack.build_stack` calls `check_custom_constraints` once the
parameter values are known (create, update, validate); the registry it is given
(`CustomConstraints`) is built once at start-up from the `converge.constraints`
entry points (`shared.plugins.constraints`) by `constraint_registry` and passed
down explicitly. Pure: validators do no I/O.

A name is one of
- checked: a validator (Converge's own `ip_addr`, `net_cidr`, ..., or a plugin's)
  runs on the value; a refusal is an error in Heat's shape,
  `Error validating value '<value>': <reason>`, followed by the constraint's name;
- known but unchecked: a name OpenStack Heat registers (today or in earlier
  releases) for a service Converge does not have (`nova.flavor`, `glance.image`,
  ...). The value is accepted as given, `validate` answers with a warning and
  the stack gets an event saying it was not checked (Heat itself fails such a
  template when the service is missing). A plugin validator for such a name
  replaces "unchecked";
- unknown (a typo): at create and update the value is refused with Heat's
  message, `"<value>" does not validate <name> (constraint not found)`; validate
  refuses the name itself (Heat's validate does not look at it; its create fails).
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from services.engine.template.constraints import ConstraintKind, ParamType
from services.engine.template.definition import UncheckedValue
from services.engine.template.errors import ErrorList, join_path
from services.engine.template.parameters import ParameterSchema
from shared.plugins.builtin.constraints import BUILTIN_VALIDATORS
from shared.plugins.constraints import ConstraintContext, Validator

#: Heat's services by constraint prefix: why a name of theirs is not checked here.
_SERVICES = {
    "barbican": "Key Manager service (barbican)",
    "blazar": "Reservation service (blazar)",
    "cinder": "Block Storage service (cinder)",
    "designate": "DNS service (designate)",
    "glance": "Image service (glance)",
    "ironic": "Bare Metal service (ironic)",
    "keystone": "Identity service (keystone)",
    "magnum": "Container Infrastructure service (magnum)",
    "manila": "Shared File Systems service (manila)",
    "mistral": "Workflow service (mistral)",
    "monasca": "Monitoring service (monasca)",
    "neutron": "Networking service (neutron)",
    "nova": "Compute service (nova)",
    "octavia": "Load Balancer service (octavia)",
    "sahara": "Data Processing service (sahara)",
    "senlin": "Clustering service (senlin)",
    "trove": "Database service (trove)",
    "zaqar": "Messaging service (zaqar)",
}

#: Every constraint name OpenStack Heat registers in its `heat.constraints` entry points
#: (setup.cfg, up to Heat 27, plus names earlier releases had) that Converge cannot check.
HEAT_SERVICE_CONSTRAINTS = frozenset(
    {
        "barbican.container",
        "barbican.secret",
        "blazar.reservation",
        "cinder.backup",
        "cinder.qos_specs",
        "cinder.snapshot",
        "cinder.volume",
        "cinder.vtype",
        "designate.domain",
        "designate.zone",
        "glance.image",
        "ironic.node",
        "ironic.portgroup",
        "keystone.domain",
        "keystone.group",
        "keystone.project",
        "keystone.region",
        "keystone.role",
        "keystone.service",
        "keystone.user",
        "magnum.baymodel",
        "magnum.cluster_template",
        "manila.share_network",
        "manila.share_snapshot",
        "manila.share_type",
        "mistral.workflow",
        "monasca.notification",
        "neutron.address_scope",
        "neutron.flow_classifier",
        "neutron.lb.provider",
        "neutron.lbaas.listener",
        "neutron.lbaas.loadbalancer",
        "neutron.lbaas.pool",
        "neutron.lbaas.provider",
        "neutron.network",
        "neutron.port",
        "neutron.port_pair",
        "neutron.port_pair_group",
        "neutron.qos_policy",
        "neutron.router",
        "neutron.security_group",
        "neutron.segment",
        "neutron.subnet",
        "neutron.subnetpool",
        "neutron.taas.tap_flow",
        "neutron.taas.tap_service",
        "nova.flavor",
        "nova.host",
        "nova.keypair",
        "nova.network",
        "nova.server",
        "octavia.availabilityzone",
        "octavia.availabilityzoneprofile",
        "octavia.flavor",
        "octavia.flavorprofile",
        "octavia.l7policy",
        "octavia.listener",
        "octavia.loadbalancer",
        "octavia.pool",
        "sahara.cluster",
        "sahara.cluster_template",
        "sahara.data_source",
        "sahara.image",
        "sahara.job_binary",
        "sahara.job_type",
        "sahara.plugin",
        "senlin.cluster",
        "senlin.policy",
        "senlin.policy_type",
        "senlin.profile",
        "senlin.profile_type",
        "trove.flavor",
        "zaqar.queue",
    }
)
#: Heat's test-only constraint (it sleeps for the value's seconds): accepted unchecked.
_HEAT_TEST_CONSTRAINT = "test_constr"
#: The most characters of a value an error message or event repeats.
_SHOWN_CHARS = 120
#: The most characters of a validator's reason an error message repeats.
_REASON_CHARS = 400
_HIDDEN = "******"


def _unchecked_reason(name: str) -> str:
    if name == _HEAT_TEST_CONSTRAINT:
        return "it is Heat's test constraint, which only delays validation"
    service = _SERVICES.get(name.split(".", 1)[0], "OpenStack service it names")
    return f"Converge does not check values against the {service}"


@dataclass(frozen=True)
class CustomConstraints:
    """Every custom constraint name Converge knows: checked ones with their validator,
    known-but-unchecked ones with the reason."""

    validators: Mapping[str, Validator] = field(default_factory=dict)
    unchecked: Mapping[str, str] = field(default_factory=dict)

    def names(self) -> frozenset[str]:
        return frozenset(self.validators) | frozenset(self.unchecked)

    def close_to(self, name: str) -> list[str]:
        return difflib.get_close_matches(name, sorted(self.names()), n=3, cutoff=0.75)


def constraint_registry(validators: Mapping[str, Validator]) -> CustomConstraints:
    """The registry: `validators` (from the entry points) plus Heat's service names
    unchecked (a validator for one of them takes its place)."""
    known = HEAT_SERVICE_CONSTRAINTS | {_HEAT_TEST_CONSTRAINT}
    unchecked = {name: _unchecked_reason(name) for name in sorted(known) if name not in validators}
    return CustomConstraints(validators=dict(validators), unchecked=unchecked)


#: Converge's own validators and Heat's names: what a caller gets that was given no registry.
DEFAULT_CONSTRAINTS = constraint_registry(BUILTIN_VALIDATORS)


def check_custom_constraints(
    schemas: Mapping[str, ParameterSchema],
    values: Mapping[str, Any],
    sources: Mapping[str, str],
    *,
    registry: CustomConstraints,
    context: ConstraintContext,
    by_value: bool,
    errors: ErrorList,
) -> tuple[UncheckedValue, ...]:
    """Check each parameter value (`values`, found at `sources`) against its custom
    constraints; report refusals in `errors`; return what was accepted unchecked.

    `by_value` (create, update): an unknown name refuses the value. Otherwise
    (validate, where a parameter may have no value) the name itself is refused.
    """
    unchecked: list[UncheckedValue] = []
    for name, schema in schemas.items():
        if schema.invalid:
            continue
        for index, constraint in enumerate(schema.constraints):
            if constraint.kind is not ConstraintKind.CUSTOM:
                continue
            assert constraint.name is not None
            cname = constraint.name
            validator = registry.validators.get(cname)
            if validator is None and cname in registry.unchecked:
                unchecked.append(UncheckedValue(name, cname, registry.unchecked[cname]))
                continue
            if validator is None and not by_value:
                close = registry.close_to(cname)
                hint = f"; did you mean {', '.join(close)}?" if close else ""
                cpath = join_path(join_path("parameters", name), "constraints")
                errors.add(
                    join_path(join_path(cpath, index), ConstraintKind.CUSTOM.value),
                    f'"{_cut(cname)}" constraint is not supported: no installed plugin provides it '
                    f"and OpenStack Heat has no such constraint{hint}",
                )
                continue
            if name not in values:
                continue
            value = values[name]
            items = value if schema.type is ParamType.COMMA_DELIMITED_LIST else [value]
            for item in items:
                problem = _problem(validator, cname, item, context, registry, schema.hidden)
                if problem is not None:
                    if constraint.description and validator is not None:
                        shown = _shown(item, schema.hidden)
                        problem = f"{constraint.description} ('{shown}' does not validate {cname})"
                    errors.add(sources.get(name, join_path("parameters", name)), problem)
                    break
    return tuple(unchecked)


def _problem(
    validator: Validator | None,
    name: str,
    value: Any,
    context: ConstraintContext,
    registry: CustomConstraints,
    hidden: bool,
) -> str | None:
    shown = _shown(value, hidden)
    if validator is None:
        close = registry.close_to(name)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        return f'"{shown}" does not validate {_cut(name)} (constraint not found){hint}'
    reason = validator(value, context)
    if reason is None:
        return None
    if hidden:
        return f"Error validating value '{shown}' (custom_constraint {name})"
    return f"Error validating value '{shown}': {_cut(reason, _REASON_CHARS)} (custom_constraint {name})"


def _shown(value: Any, hidden: bool) -> str:
    if hidden:
        return _HIDDEN
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return _cut(text)


def _cut(text: str, most: int = _SHOWN_CHARS) -> str:
    return text if len(text) <= most else text[: most - 3] + "..."
