"""The custom constraints Converge checks itself: Heat's common constraints.

Registered through the `converge.constraints` entry points in Converge's own
`pyproject.toml` (see `shared.plugins.constraints`), so plugins' constraints are
first-class. Each is a pure validator `(value, context) -> reason | None` with the
meaning OpenStack Heat gives the name (`heat/engine/constraint/common_constraints.py`
and the neutron-lib helpers it calls), written on the standard library:

- `ip_addr`: an IPv4 or IPv6 address (no zone index, no leading zeros);
- `net_cidr` (and `cidr`, a Converge alias): an address with a prefix length; an
  IPv4 value must be written as its own canonical form (`10.0.0.0/24`, not
  `10.0.0.0/255.255.255.0`), host bits may be set (`10.0.0.1/24`), as in Heat;
- `ip_or_cidr`: either of the two;
- `mac_addr`: a 48-bit MAC address in any of the usual spellings
  (`fa:16:3e:00:00:01`, `FA-16-3E-00-00-01`, `fa16.3e00.0001`, `fa163e000001`);
- `iso_8601`: an ISO 8601 date or date and time;
- `expiration`: an ISO 8601 date and time in the future (a time without a zone is
  UTC); empty is accepted;
- `timezone`: an IANA time zone name (`Europe/Paris`); empty is accepted;
- `dns_name`, `rel_dns_name`, `dns_domain`: Heat's DNS rules (labels of 1-63
  lower-case letters, digits or hyphens, not starting or ending with a hyphen, at
  most 255 characters; a relative name has no trailing dot, a domain has one);
  empty is accepted by the last two, as in Heat;
- `cron_expression`: what `croniter` (Heat's parser) accepts; empty is accepted;
- `json_string`: a string holding JSON; empty is accepted.
"""

from __future__ import annotations

import ipaddress
import json
import re
import zoneinfo
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

import croniter

from shared.plugins.constraints import ConstraintContext

#: Heat's DNS limits (`heat/common/netutils.py`).
_FQDN_MAX = 255
_LABEL = re.compile(r"[a-z0-9-]{1,63}")
_DIGITS = re.compile(r"[0-9]+")
#: The longest cron expression looked at (croniter's own are far shorter).
_CRON_MAX = 1000
_HEX = "[0-9A-Fa-f]"
#: The MAC spellings netaddr (Heat's parser) accepts for a 48-bit address.
_MAC = tuple(
    re.compile(p)
    for p in (
        ":".join([f"{_HEX}{{1,2}}"] * 6),
        "-".join([f"{_HEX}{{1,2}}"] * 6),
        ":".join([f"{_HEX}{{1,4}}"] * 3),
        "-".join([f"{_HEX}{{1,4}}"] * 3),
        r"\.".join([f"{_HEX}{{1,4}}"] * 3),
        "-".join([f"{_HEX}{{5,6}}"] * 2),
        ":".join([f"{_HEX}{{5,6}}"] * 2),
        f"{_HEX}{{11,12}}",
    )
)


def _is_address(value: Any) -> bool:
    if not isinstance(value, str) or "%" in value or value != value.strip():
        return False
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True


def ip_addr(value: Any, context: ConstraintContext) -> str | None:
    return None if _is_address(value) else "Invalid IP address"


def net_cidr(value: Any, context: ConstraintContext) -> str | None:
    if not isinstance(value, str) or value != value.strip():
        return f"'{value}' is not a valid IP subnet"
    try:
        interface = ipaddress.ip_interface(value)
    except ValueError:
        return f"'{value}' is not a valid IP subnet"
    if "%" in value:
        return f"'{value}' is not a valid IP subnet"
    if "/" not in value or (interface.version == 4 and str(interface) != value):
        return f"'{value}' isn't a recommended CIDR, '{interface.network}' is the recommended value"
    return None


def ip_or_cidr(value: Any, context: ConstraintContext) -> str | None:
    if isinstance(value, str) and "/" in value:
        return net_cidr(value, context)
    return None if _is_address(value) else f"'{value}' is not a valid IP address"


def mac_addr(value: Any, context: ConstraintContext) -> str | None:
    if isinstance(value, str) and any(p.fullmatch(value) for p in _MAC):
        return None
    return "Invalid MAC address."


def _iso_time(value: Any) -> datetime:
    """`value` read as ISO 8601 (ValueError if it is not)."""
    if not isinstance(value, str):
        raise ValueError("not a string")
    return datetime.fromisoformat(value)


def iso_8601(value: Any, context: ConstraintContext) -> str | None:
    try:
        _iso_time(value)
    except ValueError:
        return "not an ISO 8601 date and time (e.g. 2026-11-25T09:30:00Z)"
    return None


def expiration(value: Any, context: ConstraintContext) -> str | None:
    if not value:
        return None
    try:
        when = _iso_time(value.strip() if isinstance(value, str) else value)
    except ValueError as exc:
        return f"Expiration {value} is invalid: {exc}"
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    if when <= context.now:
        return f"Expiration {value} is invalid: Expiration time is out of date."
    return None


@lru_cache(maxsize=1)
def _zones() -> frozenset[str]:
    return frozenset(zoneinfo.available_timezones())


def timezone(value: Any, context: ConstraintContext) -> str | None:
    if not value:
        return None
    if isinstance(value, str) and value in _zones():
        return None
    return f"Invalid timezone: 'No time zone found with key {value}'"


def _dns_problem(value: str) -> str | None:
    """Why `value` is not a DNS name by Heat's rules, or None."""
    trimmed = value.removesuffix(".")
    if len(trimmed) > _FQDN_MAX:
        return f"'{trimmed}' exceeds the {_FQDN_MAX} character FQDN limit"
    labels = trimmed.split(".")
    for label in labels:
        if not label:
            return "Encountered an empty component."
        if label.startswith("-") or label.endswith("-"):
            return f"Name '{label}' must not start or end with a hyphen."
        if _LABEL.fullmatch(label) is None:
            return (
                f"Name '{label}' must be 1-63 characters long, each of which can only be "
                "alphanumeric or a hyphen."
            )
    if value.endswith(".") and len(labels) > 1 and _DIGITS.fullmatch(labels[-1]):
        return f"TLD '{labels[-1]}' must not be all numeric."
    return None


def dns_name(value: Any, context: ConstraintContext) -> str | None:
    if not value:
        return None
    if not isinstance(value, str):
        return f"'{value}' not in valid format. Reason: not a string"
    problem = _dns_problem(value)
    return None if problem is None else f"'{value}' not in valid format. Reason: {problem}"


def rel_dns_name(value: Any, context: ConstraintContext) -> str | None:
    if not value:
        return None
    if isinstance(value, str) and value.endswith("."):
        return f"'{value}' is a FQDN. It should be a relative domain name."
    if isinstance(value, str) and len(value) > _FQDN_MAX - 3:
        return (
            f"'{value}' contains '{len(value)}' characters. Adding a domain name will cause it to "
            f"exceed the maximum length of a FQDN of '{_FQDN_MAX}'."
        )
    return dns_name(value, context)


def dns_domain(value: Any, context: ConstraintContext) -> str | None:
    if not value:
        return None
    problem = dns_name(value, context)
    if problem is not None:
        return problem
    return None if str(value).endswith(".") else f"'{value}' must end with '.'."


def cron_expression(value: Any, context: ConstraintContext) -> str | None:
    if not value:
        return None
    if not isinstance(value, str):
        return "Invalid CRON expression: not a string"
    if len(value) > _CRON_MAX:
        return f"Invalid CRON expression: longer than {_CRON_MAX} characters"
    try:
        croniter.croniter(value)
    except (ValueError, KeyError, TypeError) as exc:
        return f"Invalid CRON expression: {exc}"
    return None


def json_string(value: Any, context: ConstraintContext) -> str | None:
    if not value:
        return None
    if not isinstance(value, str):
        return f"JSON string {value} is invalid: not a string"
    try:
        json.loads(value)
    except json.JSONDecodeError as exc:
        return f"JSON string {value} is invalid: {exc}"
    except RecursionError:
        return f"JSON string {value} is invalid: nested too deeply"
    return None


#: What Converge's own entry points register (the engine's default when no entry points are read).
BUILTIN_VALIDATORS = {
    "ip_addr": ip_addr,
    "net_cidr": net_cidr,
    "cidr": net_cidr,
    "ip_or_cidr": ip_or_cidr,
    "mac_addr": mac_addr,
    "iso_8601": iso_8601,
    "expiration": expiration,
    "timezone": timezone,
    "dns_name": dns_name,
    "rel_dns_name": rel_dns_name,
    "dns_domain": dns_domain,
    "cron_expression": cron_expression,
    "json_string": json_string,
}
