"""The dependency graph of a stack: edges, reverse edges, leaves and cycles.

Built by `stack.load_stack` from each resource's `requires` (implicit edges
from get_resource/get_attr plus explicit depends_on). Linear time, iterative
(no recursion limit on 100,000-resource stacks).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping


def reverse_edges(requires: Mapping[str, Iterable[str]]) -> dict[str, frozenset[str]]:
    """name -> names of the resources that require it."""
    dependents: dict[str, set[str]] = {name: set() for name in requires}
    for name, needs in requires.items():
        for need in needs:
            dependents.setdefault(need, set()).add(name)
    return {name: frozenset(users) for name, users in dependents.items()}


def find_cycles(requires: Mapping[str, Iterable[str]], *, limit: int = 10) -> list[list[str]]:
    """Up to `limit` distinct cycles, each as names in edge order, first name repeated
    at the end: `["a", "b", "c", "a"]` means a requires b requires c requires a."""
    white, grey, black = 0, 1, 2
    colour = dict.fromkeys(requires, white)
    cycles: list[list[str]] = []
    seen_sets: set[frozenset[str]] = set()
    for root in requires:
        if colour[root] != white:
            continue
        path: list[str] = [root]
        position = {root: 0}
        colour[root] = grey
        iterators = [iter(sorted(requires[root]))]
        while iterators:
            step = next(iterators[-1], None)
            if step is None:
                iterators.pop()
                done = path.pop()
                del position[done]
                colour[done] = black
                continue
            state = colour.get(step)
            if state is None:  # edge to an unknown name: reported elsewhere
                continue
            if state == grey:
                cycle = [*path[position[step] :], step]
                key = frozenset(cycle)
                if key not in seen_sets:
                    seen_sets.add(key)
                    cycles.append(cycle)
                    if len(cycles) >= limit:
                        return cycles
                continue
            if state == white:
                colour[step] = grey
                position[step] = len(path)
                path.append(step)
                iterators.append(iter(sorted(requires[step])))
    return cycles
