"""CPU time the kernel counted: what a benchmark phase cost, per process group.

Where it sits: `bench.quick` and `bench.engine_profile` take a `snapshot` of
the running system before and after a phase; `spent` between the two,
divided by the phase's resources, is what a resource cost, and where: in
Converge's processes, or PostgreSQL's and RabbitMQ's. (On a shared virtual
machine a CPU second is not a fixed amount of work: the same code's figure
moves about as much as its rate; docs/performance.md, `make bench-quick`.)

A service's figure is its process and every process under it (an engine's
template pool, where an update's template is parsed). PostgreSQL's and
RabbitMQ's processes (`OTHERS`) are found by command name, all of them: on a
machine shared with other runs their figure includes that work too, which
the services' figures never do. Each process counts its own time and that
of the children it has waited for, so a process that ends between the two
snapshots still counts once its parent (in the same group) has reaped it.
The kernel counts in clock ticks (10 ms each): over a phase of a few CPU
seconds a figure is good to a few percent.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")
#: Processes outside Converge whose CPU time is counted: PostgreSQL and RabbitMQ.
OTHERS = ("postgres", "beam.smp")


@dataclass(frozen=True)
class Process:
    parent: int
    command: str
    seconds: float  # user + system CPU time so far, with that of the children it waited for


def read_process(pid: int) -> Process | None:
    """`/proc/<pid>/stat`'s parent, command and CPU seconds (utime, stime, cutime,
    cstime); None once it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    head, _, rest = text.rpartition(")")  # the command may hold spaces and parentheses
    fields = rest.split()
    ticks = sum(int(f) for f in fields[11:15])
    return Process(int(fields[1]), head.partition("(")[2], ticks / TICKS)


def processes() -> dict[int, Process]:
    """Every process the kernel lists now, by pid."""
    found: dict[int, Process] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            process = read_process(int(entry.name))
            if process is not None:
                found[int(entry.name)] = process
    return found


def tree(root: int, listed: Mapping[int, Process]) -> set[int]:
    """`root` and every process under it, among `listed`."""
    children: defaultdict[int, list[int]] = defaultdict(list)
    for pid, process in listed.items():
        children[process.parent].append(pid)
    found, todo = set(), [root]
    while todo:
        pid = todo.pop()
        if pid in listed and pid not in found:
            found.add(pid)
            todo.extend(children[pid])
    return found


@dataclass(frozen=True)
class CpuUse:
    """CPU seconds so far: of each service's processes, and of `OTHERS`' by command."""

    services: dict[str, float]  # service name -> seconds
    others: dict[str, float]  # command -> seconds


def snapshot(services: Mapping[str, int]) -> CpuUse:
    """The CPU seconds so far of each of `services` (name -> pid), with the processes
    under it, and of every process named in `OTHERS`. Reads /proc: call it in a thread."""
    listed = processes()
    others = dict.fromkeys(OTHERS, 0.0)
    for process in listed.values():
        if process.command in others:
            others[process.command] += process.seconds
    return CpuUse(
        services={name: sum(listed[p].seconds for p in tree(pid, listed)) for name, pid in services.items()},
        others=others,
    )


def spent(before: CpuUse, after: CpuUse) -> dict[str, float]:
    """CPU seconds between the two snapshots: by service name, and by command for `OTHERS`.
    A command's figure is never below zero: a whole tree of its processes that ended
    between the snapshots (another test's embedded PostgreSQL, stopped) takes its time
    out of the second sum without anything of ours having run less, so its figure is
    a lower bound (and "all" at least the services' own)."""
    out = {name: seconds - before.services.get(name, 0.0) for name, seconds in after.services.items()}
    for command, seconds in after.others.items():
        out[command] = max(0.0, seconds - before.others.get(command, 0.0))
    return out
