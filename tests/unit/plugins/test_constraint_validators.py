"""Custom constraint validators: Converge's own (Heat's common constraints, with Heat's
meaning) and the sandbox's, and how `converge.constraints` entry points are loaded.

Real: the validator functions and the entry-point loader; no engine, no I/O.
"""

from __future__ import annotations

from datetime import UTC, datetime
from importlib.metadata import EntryPoint
from typing import Any

import pytest

from shared.plugins.builtin import constraints as builtin
from shared.plugins.builtin.constraints import BUILTIN_VALIDATORS
from shared.plugins.constraints import CONSTRAINT_GROUP, ConstraintContext, load_constraints
from shared.plugins.registry import PluginLoadError

NOW = ConstraintContext(now=datetime(2026, 11, 25, 12, 0, tzinfo=UTC))

VALID: list[tuple[str, Any]] = [
    ("ip_addr", "10.0.0.1"),
    ("ip_addr", "2001:db8::1"),
    ("net_cidr", "10.0.0.0/24"),
    ("net_cidr", "10.0.0.1/24"),  # host bits set: Heat accepts it too
    ("net_cidr", "2001:db8::/64"),
    ("cidr", "192.168.0.0/16"),
    ("ip_or_cidr", "10.0.0.1"),
    ("ip_or_cidr", "10.0.0.0/8"),
    ("mac_addr", "fa:16:3e:00:00:01"),
    ("mac_addr", "FA-16-3E-00-00-01"),
    ("mac_addr", "fa16.3e00.0001"),
    ("mac_addr", "fa163e000001"),
    ("iso_8601", "2026-11-25T09:30:00Z"),
    ("iso_8601", "2026-11-25"),
    ("expiration", "2027-01-01T00:00:00Z"),
    ("expiration", "2027-01-01T00:00:00"),  # no zone: UTC
    ("expiration", ""),
    ("timezone", "Europe/Paris"),
    ("timezone", "UTC"),
    ("timezone", ""),
    ("dns_name", "www.example.com"),
    ("dns_name", "www.example.com."),
    ("dns_name", "host-1"),
    ("rel_dns_name", "www"),
    ("rel_dns_name", ""),
    ("dns_domain", "example.com."),
    ("dns_domain", ""),
    ("cron_expression", "*/5 * * * *"),
    ("cron_expression", "0 3 * * mon"),
    ("cron_expression", ""),
    ("json_string", '{"a": [1, 2]}'),
    ("json_string", ""),
]

INVALID: list[tuple[str, Any, str]] = [
    ("ip_addr", "10.0.0.300", "Invalid IP address"),
    ("ip_addr", "10.0.0", "Invalid IP address"),
    ("ip_addr", "010.0.0.1", "Invalid IP address"),
    ("ip_addr", " 10.0.0.1", "Invalid IP address"),
    ("ip_addr", 5, "Invalid IP address"),
    ("net_cidr", "10.0.0.0", "'10.0.0.0' isn't a recommended CIDR, '10.0.0.0/32' is the recommended value"),
    ("net_cidr", "10.0.0.0/255.255.255.0", "'10.0.0.0/24' is the recommended value"),
    ("net_cidr", "10.0.0.0/33", "'10.0.0.0/33' is not a valid IP subnet"),
    ("net_cidr", "nope", "is not a valid IP subnet"),
    ("ip_or_cidr", "10.0.0.999", "'10.0.0.999' is not a valid IP address"),
    ("ip_or_cidr", "10.0.0.0/40", "is not a valid IP subnet"),
    ("mac_addr", "fa:16:3e:00:00", "Invalid MAC address."),
    ("mac_addr", "zz:16:3e:00:00:01", "Invalid MAC address."),
    ("iso_8601", "25/11/2026", "not an ISO 8601 date and time"),
    (
        "expiration",
        "2026-01-01T00:00:00Z",
        "Expiration 2026-01-01T00:00:00Z is invalid: Expiration time is out",
    ),
    ("expiration", "tomorrow", "Expiration tomorrow is invalid"),
    ("timezone", "Mars/Olympus", "Invalid timezone: 'No time zone found with key Mars/Olympus'"),
    ("timezone", "../../etc/passwd", "Invalid timezone"),
    ("dns_name", "Www.example.com", "Name 'Www' must be 1-63 characters long"),  # Heat: lower case only
    ("dns_name", "-www.example.com", "Name '-www' must not start or end with a hyphen."),
    ("dns_name", "www..example", "Encountered an empty component."),
    ("dns_name", "www.example.123.", "TLD '123' must not be all numeric."),
    ("dns_name", "a" * 64, "must be 1-63 characters long"),
    ("dns_name", ".".join(["a" * 60] * 5), "exceeds the 255 character FQDN limit"),
    ("rel_dns_name", "www.", "'www.' is a FQDN. It should be a relative domain name."),
    ("dns_domain", "example.com", "'example.com' must end with '.'."),
    ("cron_expression", "61 * * * *", "Invalid CRON expression:"),
    ("cron_expression", "* * *", "Invalid CRON expression:"),
    ("cron_expression", "* " * 1000, "longer than 1000 characters"),
    ("json_string", "{nope", "JSON string {nope is invalid:"),
    ("json_string", "[" * 100_000, "JSON string"),
]


@pytest.mark.parametrize(("name", "value"), VALID)
def test_a_valid_value_passes(name: str, value: Any) -> None:
    assert BUILTIN_VALIDATORS[name](value, NOW) is None


@pytest.mark.parametrize(("name", "value", "reason"), INVALID)
def test_an_invalid_value_is_refused_with_heats_reason(name: str, value: Any, reason: str) -> None:
    problem = BUILTIN_VALIDATORS[name](value, NOW)
    assert problem is not None
    assert reason in problem


def test_expiration_is_judged_against_the_context_clock() -> None:
    later = ConstraintContext(now=datetime(2027, 6, 1, tzinfo=UTC))
    assert builtin.expiration("2027-01-01T00:00:00Z", NOW) is None
    assert builtin.expiration("2027-01-01T00:00:00Z", later) is not None


def test_sandbox_constraints_check_the_id_form_and_the_flavor_list() -> None:
    from services.sandbox import constraints as sandbox

    good = "0f2c4a7e-3b1d-4c55-9a0e-1d2b3c4d5e6f"
    assert sandbox.network(good, NOW) is None
    assert sandbox.server(good, NOW) is None
    assert sandbox.network("private-net", NOW) == (
        "not a sandbox network id (a sandbox id is a lower-case UUID; names are not accepted)"
    )
    assert sandbox.volume(good.upper(), NOW) is not None
    assert sandbox.flavor("m1.small", NOW) is None
    assert "m1.tiny, m1.small" in str(sandbox.flavor("m1.huge", NOW))


def test_converge_registers_its_validators_and_the_example_plugins_through_entry_points() -> None:
    from converge_example_plugin import thing_name

    found = load_constraints()
    assert {n: found[n] for n in BUILTIN_VALIDATORS} == BUILTIN_VALIDATORS
    assert found["example.thing_name"] is thing_name
    assert {"sandbox.network", "sandbox.server", "sandbox.flavor"} <= set(found)


def _point(name: str, value: str) -> EntryPoint:
    return EntryPoint(name=name, value=value, group=CONSTRAINT_GROUP)


@pytest.mark.parametrize(
    ("point", "fragment"),
    [
        (_point("x", "no_such_module_h1:f"), "cannot import"),
        (_point("x", "shared.plugins.builtin.constraints:nope"), "cannot import"),
        (_point("x", "shared.plugins.constraints:ConstraintContext"), "is not a validator function"),
        (_point("bad name", "shared.plugins.builtin.constraints:ip_addr"), "a constraint name is"),
        (
            _point("x", "tests.unit.plugins.plugin_fakes:unpicklable_validator"),
            "cannot be sent to the engine's template workers",
        ),
    ],
)
def test_a_broken_constraint_plugin_names_its_entry_point(point: EntryPoint, fragment: str) -> None:
    with pytest.raises(PluginLoadError) as caught:
        load_constraints([point])
    assert fragment in str(caught.value)
    assert f"constraint plugin {point.name!r}" in str(caught.value)
    assert CONSTRAINT_GROUP in str(caught.value)


def test_two_plugins_claiming_one_constraint_name_is_an_error() -> None:
    points = [
        _point("ip_addr", "shared.plugins.builtin.constraints:ip_addr"),
        _point("ip_addr", "shared.plugins.builtin.constraints:mac_addr"),
    ]
    with pytest.raises(PluginLoadError, match="duplicate constraint name"):
        load_constraints(points)
    same = [points[0], points[0]]
    assert load_constraints(same) == {"ip_addr": builtin.ip_addr}
