"""The dashboard's graph snapshot (`live.stack_graph`): nodes and dependency edges from
rows and the template. Pure; no database, nothing faked."""

from __future__ import annotations

from services.engine.api.live import GraphRow, stack_graph

TEMPLATE_ID = "t2"


def row(rid: int, name: str, *, requires: tuple[int, ...] = (), **kw: object) -> GraphRow:
    fields: dict[str, object] = {
        "type": "OS::Heat::None",
        "physical_id": f"p{rid}",
        "action": "CREATE",
        "status": "COMPLETE",
        "status_reason": "",
        "replaces": None,
        "template_id": TEMPLATE_ID,
        "drifted": False,
        **kw,
    }
    return GraphRow(resource_id=rid, name=name, requires=requires, **fields)  # type: ignore[arg-type]


def test_template_resources_take_their_edges_from_the_template_and_others_from_their_rows() -> None:
    rows = [
        row(1, "net"),
        row(2, "subnet", action="INIT"),  # not converged yet: no stored requirements
        row(3, "old", requires=(1,), action="DELETE", status="IN_PROGRESS"),  # gone from the template
    ]
    graph = stack_graph(
        rows,
        template_requires={"net": frozenset(), "subnet": frozenset({"net"})},
        current_template_id=TEMPLATE_ID,
    )
    assert graph["edges"] == [{"from": "net", "to": "old"}, {"from": "net", "to": "subnet"}]
    assert [n["name"] for n in graph["nodes"]] == ["net", "subnet", "old"]
    assert graph["nodes"][2]["status"] == "IN_PROGRESS"


def test_replaced_and_drifted_are_flagged_and_unknown_requirements_are_dropped() -> None:
    rows = [
        row(5, "web1", replaces=4),  # replaced by the current operation
        row(6, "web2", replaces=3, template_id="t1"),  # replaced by an earlier one
        row(7, "vol", drifted=True, requires=(99,)),  # 99 is no current row
    ]
    graph = stack_graph(rows, template_requires=None, current_template_id=TEMPLATE_ID)
    flags = {n["name"]: (n["replaced"], n["drifted"]) for n in graph["nodes"]}
    assert flags == {"web1": (True, False), "web2": (False, False), "vol": (False, True)}
    assert graph["edges"] == []
    assert graph["nodes"][0]["physical_resource_id"] == "p5"
