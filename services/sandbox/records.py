"""The sandbox cloud's state as plain JSON data, and back. Pure.

Where it sits: `SandboxService` turns what a request changed into records
(`resource_record`) for the state file (state.py) to keep; at start-up
`resource_from_record` turns them back into the `Resource`s `Cloud.restore`
takes. A record holds everything a resource is: its spec, status, times,
creation order, the addresses it holds and its build in progress (when it
ends, how, and which timer is its). What is derived (who uses what, the
subnets of a network, the address pools, the build timers, the counts) is
rebuilt by `Cloud.restore`. A server's configuration agent (its API and token) is
kept too, so a restarted sandbox's servers go on polling.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from services.sandbox.addresses import Port
from services.sandbox.model import Build, Resource
from services.sandbox.specs import Kind, Status, parse_spec


def resource_record(res: Resource) -> dict[str, Any]:
    build = res.build
    return {
        "id": res.id,
        "kind": res.kind.value,
        "spec": res.spec.model_dump(mode="json"),
        "status": res.status.value,
        "reason": res.reason,
        "created_at": res.created_at,
        "updated_at": res.updated_at,
        "seq": res.seq,
        "ports": [[p.network, p.subnet, p.address] for p in res.ports],
        "build": None
        if build is None
        else {"ready_at": build.ready_at, "failure": build.failure, "generation": build.generation},
        "agent": list(res.agent) if res.agent is not None else None,
    }


def resource_from_record(data: Mapping[str, Any]) -> Resource:
    kind = Kind(data["kind"])
    build = data.get("build")
    return Resource(
        id=str(data["id"]),
        kind=kind,
        spec=parse_spec(kind, data["spec"]),
        status=Status(data["status"]),
        reason=str(data["reason"]),
        created_at=float(data["created_at"]),
        updated_at=float(data["updated_at"]),
        seq=int(data["seq"]),
        ports=tuple(Port(str(n), str(s), str(a)) for n, s, a in data.get("ports", ())),
        build=None
        if build is None
        else Build(float(build["ready_at"]), str(build["failure"]), int(build["generation"])),
        agent=_agent(data.get("agent")),
    )


def _agent(value: Any) -> tuple[str, str] | None:
    """A record's agent (records written before agents existed have none)."""
    if isinstance(value, list) and len(value) == 2 and all(isinstance(v, str) for v in value):
        return (value[0], value[1])
    return None
