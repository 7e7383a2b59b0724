"""The benchmark stacks: N no-op resources in three shapes.

`generation` is in every root value, so the update to generation 2 changes
every resource: roots directly, the rest through the attribute they read.

- independent: `OS::Heat::None`, no edges;
- chain: `OS::Heat::TestResource`, each reads the previous one's `output`;
- layered: `OS::Heat::TestResource` in layers of `width`; each resource below
  the first depends on 2 of the previous layer and reads `output` of one.

`wait` (seconds) makes every create wait that long (`action_wait_secs`),
finished by the observer, for the critical-path benchmark.
"""

from __future__ import annotations

from typing import Any

VERSION = "2018-08-31"


def independent(n: int, *, generation: int = 1) -> dict[str, Any]:
    resources = {
        f"r{i}": {"type": "OS::Heat::None", "properties": {"value": f"g{generation}-{i}"}} for i in range(n)
    }
    return {"heat_template_version": VERSION, "resources": resources}


def _test(value: Any, wait: float) -> dict[str, Any]:
    props: dict[str, Any] = {"value": value}
    if wait:
        props["action_wait_secs"] = {"create": wait}
    return props


def chain(n: int, *, generation: int = 1, wait: float = 0) -> dict[str, Any]:
    resources: dict[str, Any] = {
        "r0": {"type": "OS::Heat::TestResource", "properties": _test(f"g{generation}", wait)}
    }
    for i in range(1, n):
        value = {"get_attr": [f"r{i - 1}", "output"]}
        resources[f"r{i}"] = {"type": "OS::Heat::TestResource", "properties": _test(value, wait)}
    return {"heat_template_version": VERSION, "resources": resources}


def layered(n: int, *, generation: int = 1, width: int = 100, wait: float = 0) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    for i in range(n):
        layer, pos = divmod(i, width)
        if layer == 0:
            resources[f"r{i}"] = {
                "type": "OS::Heat::TestResource",
                "properties": _test(f"g{generation}-{i}", wait),
            }
            continue
        a = (layer - 1) * width + pos
        b = (layer - 1) * width + (pos + 1) % width
        resources[f"r{i}"] = {
            "type": "OS::Heat::TestResource",
            "properties": _test({"get_attr": [f"r{a}", "output"]}, wait),
            "depends_on": [f"r{b}"],
        }
    return {"heat_template_version": VERSION, "resources": resources}


def build(shape: str, n: int, *, generation: int = 1) -> dict[str, Any]:
    if shape == "independent":
        return independent(n, generation=generation)
    if shape == "chain":
        return chain(n, generation=generation)
    if shape == "layered":
        return layered(n, generation=generation)
    raise ValueError(f"unknown shape {shape!r}")
