"""Bundles (`shared.bus.bundles`): how messages for one queue are grouped into one AMQP
message, and read back. Pure functions: bytes in, bytes out."""

from __future__ import annotations

import pytest

from shared.bus import bundles
from shared.errors import MessageRejected


def test_bodies_are_grouped_in_order_up_to_the_most_members() -> None:
    bodies = [b"a", b"b", b"c", b"d", b"e"]
    assert bundles.pack(bodies, max_members=2) == [[0, 1], [2, 3], [4]]
    assert bundles.pack(bodies, max_members=64) == [[0, 1, 2, 3, 4]]


def test_one_member_at_most_groups_nothing() -> None:
    assert bundles.pack([b"a", b"b"], max_members=1) == [[0], [1]]


def test_a_bundle_beyond_its_first_member_stays_under_its_byte_bound() -> None:
    bodies = [b"x" * 60, b"y" * 30, b"z" * 30, b"w" * 200, b"v" * 10]
    # 60 starts a bundle; 30 + 30 fit in 64 more bytes, and nothing else does;
    # 200 goes alone, and 10 joins it (a first member's size is not counted).
    assert bundles.pack(bodies, max_members=10, max_bytes=64) == [[0, 1, 2], [3, 4]]


def test_members_come_back_as_they_went_in() -> None:
    members = [b'{"n":1}', b"", b'{"n":"\xc3\xa9"}', b"x" * 70_000]
    assert bundles.decode(bundles.encode(members)) == members


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b'{"n":1}', "marker"),
        (bundles.MAGIC, "no member"),
        (bundles.MAGIC + b"\x00\x00", "cut short in its length"),
        (bundles.MAGIC + b"\x00\x00\x00\x05abc", "member 1 is cut short (5 bytes said)"),
        (bundles.encode([b"ok"]) + b"\x00\x00\x00\x09abc", "member 2 is cut short"),
    ],
)
def test_a_body_that_is_not_a_bundle_is_rejected_naming_what_is_wrong(body: bytes, says: str) -> None:
    with pytest.raises(MessageRejected, match=r"bundle: .*" + says.replace("(", r"\(").replace(")", r"\)")):
        bundles.decode(body)
