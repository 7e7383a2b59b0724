"""The dashboard's graph drawing: boxes in layers, and every edge routed around them.

Where it sits: `GET .../graph` (`api.live.graph`) runs `layout` in the template
pool (user-controlled work, never on the event loop) and sends the positions
and edge paths with the nodes; the page only draws them. Pure: no I/O.

The method is the layered (Sugiyama) one, with igraph doing its hard parts:
1. Layers by longest path, so every edge points down; a layer wider than
   `MAX_ROW` boxes wraps onto several rows (2,000 independent resources make
   a block, not a line).
2. An edge that spans several rows gets a chain of dummy vertices, one per row
   it passes, each taking a slot of its row like a box does. Dummies are shared
   by the edges of one source (or one target, whichever side fans out more), so
   a resource that 500 others need draws one trunk, not 500 parallel lines.
3. igraph's `layout_sugiyama` orders each row to remove crossings and places
   boxes and dummies in slots (`igraph` from PyPI, a declared dependency).
4. Paths: an edge leaves its source's bottom centre and ends on its target's
   top centre; it crosses each row it passes vertically through its dummy's
   empty slot, and goes from one row to the next inside the gap between them.
   A gap holds no box, and a slot holds one box or one dummy, so no edge can
   pass through a box: the page draws each gap-crossing piece as a curve
   inside the rectangle its two points span, which lies in the gap.
Edges beyond `DUMMY_BUDGET` dummies (pathological templates: a thousand long
edges spanning a thousand rows) and edges that do not point down (a cycle, which
no valid template has) go round the drawing instead: down into the gap below
their source's row, across to a lane left of every box, down it to the gap
above their target's row, and across to it. Also never through a box.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import igraph

#: Box size and the space between boxes (CSS pixels at zoom 1): the page draws with these.
NODE_WIDTH = 176
NODE_HEIGHT = 48
GAP_X = 32
GAP_Y = 72
#: Boxes in one row at most; a wider layer wraps.
MAX_ROW = 40
#: Dummy vertices at most per node (plus a constant): past it, long edges go round.
DUMMIES_PER_NODE = 4
#: Spacing of the lanes left of the drawing for edges that go round.
LANE_GAP = 8
LANES = 32
#: Crossing-reduction sweeps igraph may take.
SWEEPS = 24

Point = tuple[float, float]


def layers(names: Sequence[str], edges: Iterable[tuple[str, str]]) -> dict[str, int]:
    """Layer of each node: one below the deepest node it requires (longest path). Nodes on
    a cycle, which no valid template has, go below all others rather than be lost."""
    succs: dict[str, list[str]] = {n: [] for n in names}
    waiting = dict.fromkeys(names, 0)
    for a, b in edges:
        if a in succs and b in waiting and a != b:
            succs[a].append(b)
            waiting[b] += 1
    layer = {n: 0 for n in names if waiting[n] == 0}
    ready = list(layer)
    for n in ready:
        for s in succs[n]:
            layer[s] = max(layer.get(s, 0), layer[n] + 1)
            waiting[s] -= 1
            if waiting[s] == 0:
                ready.append(s)
    deepest = max(layer.values(), default=-1)
    return {n: layer.get(n, deepest + 1) for n in names}


def rows_of(names: Sequence[str], layer: dict[str, int], max_row: int) -> dict[str, int]:
    """Row of each node: its layer's rows, a layer of more than `max_row` nodes wrapped."""
    by_layer: dict[int, list[str]] = {}
    for n in names:
        by_layer.setdefault(layer[n], []).append(n)
    row: dict[str, int] = {}
    at = 0
    for key in sorted(by_layer):
        members = by_layer[key]
        for start in range(0, len(members), max_row):
            for n in members[start : start + max_row]:
                row[n] = at
            at += 1
    return row


@dataclass
class _Drawing:
    """One connected piece laid out on its own, in its own pixels (top-left at 0, 0)."""

    boxes: dict[str, tuple[float, float]]
    edges: list[dict[str, Any]]
    width: float
    height: float


def layout(
    names: Sequence[str], edges: Sequence[tuple[str, str]], *, max_row: int = MAX_ROW, aspect: float = 1.6
) -> dict[str, Any]:
    """Positions and edge paths for `names` and `edges` ((required, dependent) pairs), as the
    JSON the page draws, in CSS pixels with the drawing's top-left at (0, 0):

    - "positions": {name: [x, y, row]} (a box's top-left corner and its row in "rows"),
      "rows": [[name, ...] left to right], "node_width", "node_height", "width", "height";
    - "edges": [{"from", "to", "points": [[x, y], ...], "arrow": bool}]: the part of the
      edge's path no earlier edge drew. An edge that shares a trunk with others starts where
      it leaves it or ends where it joins it; "arrow" says whether it ends on its target.

    Each connected piece is laid out alone, and the pieces are packed in shelves about
    `aspect` times wider than high (2,000 unrelated resources make a block)."""
    names = list(dict.fromkeys(names))
    known = set(names)
    pairs = sorted({(a, b) for a, b in edges if a in known and b in known and a != b})
    pieces = _pieces(names, pairs)
    drawings = [_draw(members, links, max(1, max_row)) for members, links in pieces]
    area = sum((d.width + GAP_X) * (d.height + GAP_Y) for d in drawings)
    shelf_width = max([area**0.5 * aspect**0.5, *(d.width for d in drawings)], default=0.0)
    positions: dict[str, list[float]] = {}
    paths: list[dict[str, Any]] = []
    x = y = shelf_height = 0.0
    for d in drawings:
        if x and x + d.width > shelf_width:
            x, y, shelf_height = 0.0, y + shelf_height + GAP_Y, 0.0
        for n, (bx, by) in d.boxes.items():
            positions[n] = [bx + x, by + y]
        for e in d.edges:
            paths.append({**e, "points": [[round(px + x, 1), round(py + y, 1)] for px, py in e["points"]]})
        x += d.width + GAP_X
        shelf_height = max(shelf_height, d.height)
    rows: dict[float, list[str]] = {}
    for n in sorted(positions, key=lambda n: (positions[n][1], positions[n][0])):
        rows.setdefault(positions[n][1], []).append(n)
    ordered = [rows[k] for k in sorted(rows)]
    for r, members in enumerate(ordered):
        for n in members:
            positions[n].append(r)
    return {
        "node_width": NODE_WIDTH,
        "node_height": NODE_HEIGHT,
        "width": max((p[0] + NODE_WIDTH for p in positions.values()), default=0.0),
        "height": max((p[1] + NODE_HEIGHT for p in positions.values()), default=0.0),
        "positions": positions,
        "rows": ordered,
        "edges": paths,
    }


def _pieces(names: list[str], edges: list[tuple[str, str]]) -> list[tuple[list[str], list[tuple[str, str]]]]:
    """The connected pieces (members in the given order, their edges), largest first."""
    parent = {n: n for n in names}

    def root(n: str) -> str:
        while parent[n] != n:
            parent[n] = parent[parent[n]]
            n = parent[n]
        return n

    for a, b in edges:
        parent[root(a)] = root(b)
    members: dict[str, list[str]] = {}
    for n in names:
        members.setdefault(root(n), []).append(n)
    links: dict[str, list[tuple[str, str]]] = {}
    for a, b in edges:
        links.setdefault(root(a), []).append((a, b))
    groups = sorted(members.items(), key=lambda kv: -len(kv[1]))
    return [(m, links.get(key, [])) for key, m in groups]


def _draw(names: list[str], edges: list[tuple[str, str]], max_row: int) -> _Drawing:
    """One connected piece: rows, dummies, igraph's placement, and the edge paths."""
    if len(names) == 1:
        return _Drawing({names[0]: (0.0, 0.0)}, [], NODE_WIDTH, NODE_HEIGHT)
    row = rows_of(names, layers(names, edges), max_row)
    down = [(a, b) for a, b in edges if row[b] > row[a]]
    around = [(a, b) for a, b in edges if row[b] <= row[a]]

    # Dummies for the edges spanning rows, shortest spans first, within the budget.
    long_out = Counter(a for a, b in down if row[b] - row[a] > 1)
    long_in = Counter(b for a, b in down if row[b] - row[a] > 1)
    budget = DUMMIES_PER_NODE * len(names) + 1000
    vertex = {n: i for i, n in enumerate(names)}
    dummy: dict[tuple[str, str, int], int] = {}  # (bundle side, bundle end, row) -> vertex
    vertex_row = [row[n] for n in names]
    links: set[tuple[int, int]] = set()
    routes: list[tuple[str, str, str, list[int]]] = []  # (from, to, bundle side, vertices)
    for a, b in sorted(down, key=lambda e: (row[e[1]] - row[e[0]], e)):
        side, end = ("s", a) if long_out[a] >= long_in[b] else ("t", b)
        span = range(row[a] + 1, row[b])
        missing = [r for r in span if (side, end, r) not in dummy]
        if len(dummy) + len(missing) > budget:
            around.append((a, b))
            continue
        for r in missing:
            dummy[(side, end, r)] = len(vertex_row)
            vertex_row.append(r)
        path = [vertex[a], *(dummy[(side, end, r)] for r in span), vertex[b]]
        links.update(pairwise(path))
        routes.append((a, b, side, path))

    slots = _place(len(vertex_row), sorted(links), vertex_row)
    lanes = min(len(around), LANES)
    margin = GAP_X + (lanes - 1) * LANE_GAP + GAP_X if around else 0.0
    left = min(slots)
    pitch = NODE_HEIGHT + GAP_Y

    def centre(v: int) -> float:
        return margin + (slots[v] - left) * (NODE_WIDTH + GAP_X) + NODE_WIDTH / 2

    def top(v: int) -> float:
        return vertex_row[v] * pitch

    real = len(names)
    drawn: set[int] = set()
    paths: list[dict[str, Any]] = []
    for a, b, side, path in routes:
        # The part no earlier edge of the bundle drew: past the trunk it leaves, or up to
        # the trunk it joins.
        if side == "s":
            shared = [i for i, v in enumerate(path) if v in drawn]
            own = path[shared[-1] :] if shared else path
        else:
            shared = [i for i, v in enumerate(path) if v in drawn]
            own = path[: shared[0] + 1] if shared else path
        drawn.update(v for v in path if v >= real)
        points: list[Point] = []
        for i, v in enumerate(own):
            if v < real:  # a box: leave from its bottom, arrive on its top
                points.append((centre(v), top(v) + NODE_HEIGHT if i == 0 else top(v)))
            else:  # a dummy: straight down through its slot (only its exit if a trunk is left here)
                if i > 0:
                    points.append((centre(v), top(v)))
                if i < len(own) - 1:
                    points.append((centre(v), top(v) + NODE_HEIGHT))
        paths.append({"from": a, "to": b, "points": points, "arrow": own[-1] == path[-1]})
    for lane, (a, b) in enumerate(sorted(around)):
        va, vb = vertex[a], vertex[b]
        x = margin - GAP_X - (lane % LANES) * LANE_GAP
        below = top(va) + NODE_HEIGHT + GAP_Y / 2
        above = top(vb) - GAP_Y / 2
        sx, tx = centre(va), centre(vb)
        points = [
            (sx, top(va) + NODE_HEIGHT),
            (sx, below),
            (x, below),
            (x, above),
            (tx, above),
            (tx, top(vb)),
        ]
        paths.append({"from": a, "to": b, "points": points, "arrow": True})
    boxes = {n: (centre(vertex[n]) - NODE_WIDTH / 2, top(vertex[n])) for n in names}
    width = max(x + NODE_WIDTH for x, _ in boxes.values())
    height = max(y + NODE_HEIGHT for _, y in boxes.values())
    return _Drawing(boxes, paths, width, height)


def _place(count: int, links: list[tuple[int, int]], rows: list[int]) -> list[float]:
    """igraph's layered placement of `count` vertices whose rows are given and whose links
    each join consecutive rows: each vertex's slot in its row, at least 1 apart (igraph
    orders the rows and places them; its placement can leave two vertices of a long
    wrapped row less than `hgap` apart, so each row is then swept left to right, pushing
    a vertex right of its left neighbour's slot where it has to)."""
    graph = igraph.Graph(n=count, edges=links, directed=True)
    placed = graph.layout_sugiyama(layers=rows, hgap=1, vgap=1, maxiter=SWEEPS)
    slots = [float(x) for x, _ in list(placed.coords)[:count]]
    by_row: dict[int, list[int]] = {}
    for v in sorted(range(count), key=lambda v: (slots[v], v)):
        by_row.setdefault(rows[v], []).append(v)
    for members in by_row.values():
        for left, v in pairwise(members):
            slots[v] = max(slots[v], slots[left] + 1)
    return slots
