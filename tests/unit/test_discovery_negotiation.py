"""Content negotiation for `/` and `/healthcheck` (services/engine/api/discovery.py): pure."""

from __future__ import annotations

import pytest

from services.engine.api.discovery import HEALTH_TYPES, preferred

PAGE_OR_VERSIONS = ("text/html", "application/json")


@pytest.mark.parametrize(
    ("accept", "chosen"),
    [
        ("application/json", "application/json"),  # keystoneauth's discovery
        ("application/json, text/plain", "application/json"),
        ("text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", "text/html"),  # a browser
        ("*/*", "text/html"),  # curl: a tie goes to the first offer
        (None, "text/html"),
        ("application/*;q=0.9, text/html;q=0.5", "application/json"),
        ("text/html;q=0, application/json;q=0.1", "application/json"),
        ("image/png", None),
        ("application/json;q=nonsense, text/html", "text/html"),
        ("APPLICATION/JSON", "application/json"),
    ],
)
def test_the_root_offers_the_page_or_the_version_document(accept: str | None, chosen: str | None) -> None:
    assert preferred(accept, PAGE_OR_VERSIONS) == chosen


def test_healthcheck_types_fall_back_to_text_in_oslos_order() -> None:
    assert preferred("*/*", HEALTH_TYPES) == "text/plain"
    assert preferred("text/html", HEALTH_TYPES) == "text/html"
    assert preferred("application/json", HEALTH_TYPES) == "application/json"
    assert preferred("image/png", HEALTH_TYPES) is None


def test_a_huge_accept_header_is_read_only_so_far() -> None:
    header = ",".join(["image/png"] * 10_000 + ["application/json"])
    assert preferred(header, PAGE_OR_VERSIONS) is None
