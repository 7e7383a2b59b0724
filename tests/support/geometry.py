"""Checks on a drawn graph's geometry, shared by the layout's unit tests and the
dashboard's browser test: does any piece of an edge's path enter a box, and does
each edge's path (with the trunks it shares) lead from its source to its target.

A piece is two consecutive points of a path. The page draws a piece either straight
or as a curve whose control points lie in the rectangle the two points span, so a
piece is checked by that rectangle: if it does not overlap a box's interior, neither
does what is drawn.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from itertools import pairwise
from typing import Any

Box = tuple[float, float, float, float]  # left, top, right, bottom

EPS = 0.01


def boxes_of(positions: Mapping[str, Sequence[float]], width: float, height: float) -> dict[str, Box]:
    return {n: (p[0], p[1], p[0] + width, p[1] + height) for n, p in positions.items()}


def overlaps(a: Box, b: Box) -> bool:
    """Whether the rectangles share interior points (touching edges do not)."""
    return a[0] < b[2] - EPS and b[0] < a[2] - EPS and a[1] < b[3] - EPS and b[1] < a[3] - EPS


def pieces(points: Sequence[Sequence[float]]) -> Iterable[Box]:
    for (x1, y1), (x2, y2) in pairwise(points):
        yield (min(x1, x2), min(y1, y2), max(x1, x2), max(y1, y2))


def edges_through_boxes(edges: Iterable[Mapping[str, Any]], boxes: Mapping[str, Box]) -> list[str]:
    """Each piece of an edge that enters a box, as 'from->to enters name'.

    Boxes are filed in a grid of cells as large as the largest box, so a piece is
    compared only with the boxes of the cells its rectangle covers (a 2,000-box
    drawing is checked in a fraction of a second, not in seconds)."""
    grid = _Grid(boxes)
    found = []
    for e in edges:
        for piece in pieces(e["points"]):
            found += [
                f"{e['from']}->{e['to']} enters {n}"
                for n in sorted(grid.near(piece))
                if overlaps(piece, boxes[n])
            ]
    return found


class _Grid:
    """The names of boxes by the grid cells they touch."""

    def __init__(self, boxes: Mapping[str, Box]) -> None:
        self._w = max((b[2] - b[0] for b in boxes.values()), default=1.0) or 1.0
        self._h = max((b[3] - b[1] for b in boxes.values()), default=1.0) or 1.0
        self._cells: dict[tuple[int, int], list[str]] = {}
        for name, box in boxes.items():
            for cell in self._cells_of(box):
                self._cells.setdefault(cell, []).append(name)

    def _cells_of(self, box: Box) -> Iterable[tuple[int, int]]:
        for i in range(int(box[0] // self._w), int(box[2] // self._w) + 1):
            for j in range(int(box[1] // self._h), int(box[3] // self._h) + 1):
                yield i, j

    def near(self, piece: Box) -> set[str]:
        return {n for cell in self._cells_of(piece) for n in self._cells.get(cell, ())}


def unconnected_edges(
    wanted: Iterable[tuple[str, str]], drawn: Sequence[Mapping[str, Any]], boxes: Mapping[str, Box]
) -> list[str]:
    """The `wanted` edges (from, to) whose source's bottom centre does not lead to their
    target's top centre along the `drawn` paths (followed in the direction drawn)."""
    after: dict[tuple[float, float], set[tuple[float, float]]] = {}
    for e in drawn:
        pts = [(round(x, 1), round(y, 1)) for x, y in e["points"]]
        for p, q in pairwise(pts):
            after.setdefault(p, set()).add(q)
    missing = []
    for a, b in wanted:
        s, t = boxes[a], boxes[b]
        start = (round((s[0] + s[2]) / 2, 1), round(s[3], 1))
        goal = (round((t[0] + t[2]) / 2, 1), round(t[1], 1))
        seen, todo = {start}, [start]
        while todo and goal not in seen:
            for q in after.get(todo.pop(), ()):
                if q not in seen:
                    seen.add(q)
                    todo.append(q)
        if goal not in seen:
            missing.append(f"{a}->{b}")
    return missing
