"""Deliberately malformed plugin objects, for the registry's error tests.

None of these is registered through an entry point; the tests build entry
points that point here.
"""

from __future__ import annotations

from shared.plugins.builtin.placeholders import NoneResource


class NotAResourceType:
    """A class that forgot to derive from ResourceType."""

    type_name = "Example::NotAType"


class SecondNone(NoneResource):
    """A different class claiming the built-in name OS::Heat::None."""


class Misnamed(NoneResource):
    type_name = "Example::Misnamed"
