"""The dashboard's graph layout (`services.engine.graph_layout`): layers follow the
dependencies, wide layers wrap, and every edge is drawn from its source to its target
without passing through a box, whatever the graph's shape. Pure; igraph is real,
nothing is faked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from services.engine.graph_layout import MAX_ROW, layers, layout
from tests.support.geometry import boxes_of, edges_through_boxes, unconnected_edges

ROOT = Path(__file__).resolve().parents[2]


def drawn_cleanly(names: list[str], edges: list[tuple[str, str]]) -> dict[str, Any]:
    """Lay out, and check every edge is drawn, source to target, through no box."""
    drawing = layout(names, edges)
    boxes = boxes_of(drawing["positions"], drawing["node_width"], drawing["node_height"])
    assert set(boxes) == set(names)
    assert edges_through_boxes(drawing["edges"], boxes) == []
    assert unconnected_edges(edges, drawing["edges"], boxes) == []
    lefts = [box[0] for box in boxes.values()]
    tops = [box[1] for box in boxes.values()]
    assert min(lefts) >= 0
    assert min(tops) >= 0
    assert max(b[2] for b in boxes.values()) <= drawing["width"]
    assert max(b[3] for b in boxes.values()) <= drawing["height"]
    return drawing


def requirements(template: dict[str, Any]) -> list[tuple[str, str]]:
    """(required, dependent) pairs of a template's get_resource / get_attr / depends_on."""
    found: set[tuple[str, str]] = set()

    def walk(value: Any, owner: str) -> None:
        if isinstance(value, dict):
            for key, inner in value.items():
                if key == "get_resource" and isinstance(inner, str):
                    found.add((inner, owner))
                elif key == "get_attr" and isinstance(inner, list) and inner:
                    found.add((inner[0], owner))
                walk(inner, owner)
        elif isinstance(value, list):
            for inner in value:
                walk(inner, owner)

    for name, body in template["resources"].items():
        walk(body.get("properties", {}), name)
        depends = body.get("depends_on", [])
        for dep in [depends] if isinstance(depends, str) else depends:
            found.add((dep, name))
    return sorted(found)


def test_the_web_tier_is_drawn_in_layers_with_its_long_edges_routed_between_boxes() -> None:
    template = yaml.safe_load((ROOT / "examples" / "web-tier-v2.yaml").read_text())
    names = list(template["resources"])
    edges = requirements(template)
    drawing = drawn_cleanly(names, edges)
    row = {n: p[2] for n, p in drawing["positions"].items()}
    assert all(row[a] < row[b] for a, b in edges), "every edge points down"
    spanning = [(a, b) for a, b in edges if row[b] - row[a] > 1]
    assert spanning, "the example has edges that pass a row (net -> web1 passes subnet's)"
    boxes = boxes_of(drawing["positions"], drawing["node_width"], drawing["node_height"])
    for e in drawing["edges"]:
        if (e["from"], e["to"]) in spanning:  # it leaves or joins a trunk, or goes round a row
            (_, y1), (_, y2) = e["points"][0], e["points"][-1]
            straight = len(e["points"]) == 2 and y1 == boxes[e["from"]][3] and y2 == boxes[e["to"]][1]
            assert not straight, e


def test_layers_are_longest_paths_and_a_cycle_is_drawn_not_lost() -> None:
    edges = [("top", "left"), ("top", "right"), ("left", "bottom"), ("right", "bottom"), ("top", "bottom")]
    assert layers(["top", "left", "right", "bottom", "alone"], edges) == {
        "top": 0, "left": 1, "right": 1, "bottom": 2, "alone": 0,
    }  # fmt: skip
    drawing = drawn_cleanly(["p", "q", "r"], [("p", "q"), ("q", "p"), ("q", "r")])
    assert set(drawing["positions"]) == {"p", "q", "r"}


def test_2000_unrelated_resources_make_a_block_not_a_line() -> None:
    drawing = drawn_cleanly([f"r{i}" for i in range(2000)], [])
    assert len(drawing["rows"]) > 20
    assert 0.5 < drawing["width"] / drawing["height"] < 4


def test_a_layer_wider_than_a_row_wraps_and_its_edges_share_one_trunk() -> None:
    names = ["net", *(f"server{i}" for i in range(500))]
    edges = [("net", f"server{i}") for i in range(500)]
    drawing = drawn_cleanly(names, edges)
    assert max(len(r) for r in drawing["rows"]) <= MAX_ROW
    assert len(drawing["rows"]) >= 1 + 500 // MAX_ROW
    points = sum(len(e["points"]) for e in drawing["edges"])
    assert points < 6 * len(edges), "the shared trunk is sent once, not once per edge"


def test_long_edges_past_the_dummy_budget_go_round_the_drawing() -> None:
    # A 1,000-long chain, each link also needed by its own resource at the very bottom.
    chain = [f"c{i}" for i in range(1000)]
    sinks = [f"s{i}" for i in range(1000)]
    edges = [(chain[i], chain[i + 1]) for i in range(999)]
    edges += [(chain[i], sinks[i]) for i in range(1000)] + [(chain[-1], s) for s in sinks]
    drawing = drawn_cleanly(chain + sinks, edges)
    points = sum(len(e["points"]) for e in drawing["edges"])
    assert points < 20 * len(edges)
