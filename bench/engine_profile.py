"""Where an engine's time goes during a 10,000-resource layered create, and what
the update of every resource and the delete after it cost beside it.

Distributed mode (the run's engines, workers and observers). While the create
runs, py-spy samples `engine-a` (`py-spy record --format raw`, 100 Hz,
non-blocking; active samples only, so samples / (seconds x rate) is the share
of one core it kept busy), and the database and the kernel count the work:

- transactions committed and rows written in the scratch database
  (`pg_stat_database`, `pg_stat_user_tables`), per resource;
- CPU seconds of every service, with the processes it started (an engine's
  template pool), of PostgreSQL and RabbitMQ (`harness.cpu`), and of the whole
  machine (`/proc/stat`), per resource.

- what the services' database sessions are doing, sampled every 20 ms
  (`harness.sessions`): on average how many wait for a lock, sit
  idle in a transaction (the service working between statements) or run a
  statement, each with the statement seen most often in that state.

The update and the delete that follow are counted the same way (not profiled):
the rows name them.

The py-spy summary (top frames by own and by inclusive samples) is written to
`<results>/engine-profile.txt`; the figures go to the report. Without py-spy
(or with `--no-profile`) only the counts are taken.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import os
import re
import shutil
import signal
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import asyncpg

from bench.harness import templates
from bench.harness.cpu import OTHERS, CpuUse, spent
from bench.harness.options import Options, Row, row, usual_size
from bench.harness.sessions import STATES, Sessions, sampled
from bench.harness.system import BIN, Outcome, System, running

RATE = 100  # py-spy samples per second
TOP = 25
SECTION = "engine profile (10k layered create, update and delete, distributed)"
_FRAME = re.compile(r"^(?P<func>.*) \((?P<file>[^:()]+)(?::\d+)?\)$")
TABLE_STATS = """SELECT relname, n_tup_ins, n_tup_upd, n_tup_del FROM pg_stat_user_tables"""


def _machine_ticks() -> tuple[int, int]:
    """(busy, total) jiffies of all cores."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = values[3] + values[4]
    return sum(values) - idle, sum(values)


def _short(frame: str) -> str:
    match = _FRAME.match(frame)
    if match is None:
        return frame
    path = match["file"]
    for marker in ("site-packages/", "/work/main/", "lib/python3"):
        if marker in path:
            path = path.split(marker, 1)[1]
    return f"{match['func']} ({path})"


def summarise(raw: str, seconds: float) -> tuple[str, int]:
    """The py-spy collapsed stacks as two top lists; and the number of samples."""
    own: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = [_short(f) for f in stack.split(";")]
        frames = [f for f in frames if not f.startswith("process ") and not f.startswith("thread ")]
        if not frames:
            continue
        total += count
        own[frames[-1]] += count
        for frame in set(frames):
            inclusive[frame] += count
    share = total / (seconds * RATE) if seconds else 0.0
    lines = [
        f"{total} samples at {RATE} Hz over {seconds:.1f} s ({share:.0%} of the time; py-spy leaves out "
        "samples it sees as idle, but a process waiting for a core on a saturated machine still counts)",
        "",
        f"Top {TOP} frames by own samples (% of active samples):",
    ]
    lines += [f"  {100 * c / total:5.1f}%  {f}" for f, c in own.most_common(TOP)] if total else []
    lines += ["", f"Top {TOP} frames by inclusive samples:"]
    lines += [f"  {100 * c / total:5.1f}%  {f}" for f, c in inclusive.most_common(TOP)] if total else []
    return "\n".join(lines) + "\n", total


async def _table_stats(pool: asyncpg.Pool) -> dict[str, tuple[int, int, int]]:
    await pool.execute("SELECT pg_stat_clear_snapshot()")
    return {
        r["relname"]: (r["n_tup_ins"], r["n_tup_upd"], r["n_tup_del"]) for r in await pool.fetch(TABLE_STATS)
    }


async def _commits(pool: asyncpg.Pool) -> int:
    await pool.execute("SELECT pg_stat_clear_snapshot()")
    return int(
        await pool.fetchval("SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()")
    )


def _start_py_spy(pid: int, out: Path) -> subprocess.Popen[bytes] | None:
    exe = shutil.which("py-spy", path=str(BIN)) or shutil.which("py-spy")
    if exe is None:
        return None
    argv = [exe, "record", "--pid", str(pid), "--rate", str(RATE), "--format", "raw", "--nonblocking"]
    return subprocess.Popen([*argv, "-o", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


@dataclass(frozen=True)
class _Counts:
    """What the kernel and the database have counted so far."""

    cpu: CpuUse  # of each service's processes, and of PostgreSQL's and RabbitMQ's
    ticks: tuple[int, int]  # the machine's (busy, total) jiffies
    commits: int
    tables: dict[str, tuple[int, int, int]]


async def _counts(system: System) -> _Counts:
    return _Counts(
        cpu=await system.cpu_use(),
        ticks=_machine_ticks(),
        commits=await _commits(system.pool),
        tables=await _table_stats(system.pool),
    )


def _phase_rows(phase: str, n: int, before: _Counts, after: _Counts, seconds: float) -> list[Row]:
    """Per resource, what one phase cost: transactions, rows written, CPU of each process,
    and how busy the machine was. The create's rows keep their names; the update's and
    the delete's say which they are."""
    label = "" if phase == "create" else f", {phase}"
    rows = [
        row(
            f"transactions committed per resource{label}",
            round((after.commits - before.commits) / n, 2),
            "",
            note="all services' sessions",
        )
    ]
    for table, (ins, upd, dele) in sorted(after.tables.items()):
        was = before.tables.get(table, (0, 0, 0))
        written = (ins - was[0], upd - was[1], dele - was[2])
        if sum(written) == 0:
            continue
        rows.append(
            row(
                f"rows written in {table} per resource{label}",
                round(sum(written) / n, 2),
                "",
                note=f"inserted {written[0]}, updated {written[1]}, deleted {written[2]}",
            )
        )
    used_by = spent(before.cpu, after.cpu)
    for name in sorted(after.cpu.services):
        used = used_by[name]
        rows.append(
            row(
                f"CPU ms per resource, {name}{label}",
                round(1000 * used / n, 3),
                "ms",
                note=f"{used:.1f} CPU s in {seconds:.1f} s, with the processes it started",
            )
        )
    for comm in sorted(OTHERS):
        used = used_by[comm]
        rows.append(
            row(
                f"CPU ms per resource, {comm}{label}",
                round(1000 * used / n, 3),
                "ms",
                note=f"{used:.1f} CPU s, every process named {comm} (other users' work included)",
            )
        )
    busy, total = (a - b for a, b in zip(after.ticks, before.ticks, strict=True))
    cores = os.cpu_count() or 1
    rows.append(
        row(
            f"whole machine busy during the {phase}",
            round(cores * busy / total, 2) if total else None,
            "cores",
            note=f"of {cores}; includes PostgreSQL, RabbitMQ and anything else running",
        )
    )
    return rows


def _session_rows(phase: str, seen: Sessions) -> list[Row]:
    """What the services' database sessions did during the phase (`harness.sessions`): how
    many, on average, were held up by a lock, idle in a transaction, running a statement."""
    rows = []
    for state in STATES:
        top = seen.most_seen(state)
        rows.append(
            row(
                f"database sessions {state} during the {phase}, mean",
                round(seen.mean(state), 3),
                "sessions",
                note=(f"most often: {top[0]} ({top[1]:.0%})" if top else "none seen")
                + f"; {seen.samples} samples",
            )
        )
    return rows


def _rate_row(phase: str, n: int, outcome: Outcome, *, profiled: bool) -> Row:
    name = "10k layered create (profiled)" if phase == "create" else f"10k layered {phase}, after it"
    status = f"{outcome.status}, {outcome.seconds:.1f} s"
    return row(
        name,
        round(n / outcome.seconds, 1) if outcome.ok else None,
        "resources/s",
        mode="distributed",
        note=f"{status}, py-spy attached to engine-a" if profiled else status,
    )


async def _stop_py_spy(spy: subprocess.Popen[bytes], out: Path, seconds: float) -> str:
    spy.send_signal(signal.SIGINT)
    try:
        _, err = await asyncio.to_thread(spy.communicate, None, 60)
    except subprocess.TimeoutExpired:
        spy.kill()
        err = b""
    return await asyncio.to_thread(_summary, out, err, seconds)


def _summary(out: Path, err: bytes, seconds: float) -> str:
    """What py-spy wrote to `out`, summarised (its directory removed after)."""
    if out.exists():
        text, _ = summarise(out.read_text(), seconds)
    else:
        text = f"py-spy wrote nothing: {err.decode(errors='replace')[-500:]}\n"
    shutil.rmtree(out.parent, ignore_errors=True)
    return text


async def _measure(system: System, n: int, options: Options, results: Path) -> list[Row]:
    """The create, profiled (py-spy on engine-a); then the update of every resource and
    the delete, counted the same way (what an update costs beyond a create shows)."""
    engine = next(s for s in system.services if s.name == "engine-a")
    out = Path(tempfile.mkdtemp(prefix="converge-profile-")) / "engine-a.txt"
    spy = _start_py_spy(engine.pid, out) if options.profile else None
    await asyncio.sleep(1.0 if spy else 0)  # let py-spy attach
    before = await _counts(system)
    async with sampled(system.database_url) as seen:
        stack, outcome = await system.create_and_wait(
            "profiled", templates.layered(n), timeout=options.phase_timeout
        )
    cpu_after = await system.cpu_use()  # before py-spy's own wind-down
    profile_text = await _stop_py_spy(spy, out, outcome.seconds) if spy is not None else ""
    await asyncio.sleep(1.5)  # statistics reach pg_stat_* within a second
    after = dataclasses.replace(await _counts(system), cpu=cpu_after)
    rows = [_rate_row("create", n, outcome, profiled=spy is not None)]
    rows += _phase_rows("create", n, before, after, outcome.seconds) + _session_rows("create", seen)
    if outcome.ok:
        for phase, template in (("update", templates.layered(n, generation=2)), ("delete", None)):
            before = await _counts(system)
            async with sampled(system.database_url) as seen:
                outcome = await system.run(phase, stack, template, timeout=options.phase_timeout)
            await asyncio.sleep(1.5)
            after = await _counts(system)
            rows.append(_rate_row(phase, n, outcome, profiled=False))
            rows += _phase_rows(phase, n, before, after, outcome.seconds) + _session_rows(phase, seen)
            if not outcome.ok:
                break
    if profile_text:
        header = f"# engine-a, py-spy, {n} resources layered create, distributed\n\n"
        await asyncio.to_thread(results.mkdir, parents=True, exist_ok=True)
        await asyncio.to_thread((results / "engine-profile.txt").write_text, header + profile_text)
        print(profile_text, flush=True)
    return [{**r, "section": SECTION} for r in rows]


async def _run(options: Options) -> list[Row]:
    n = usual_size(options)
    results = Path(options.results) if options.results else Path(__file__).parent / "results"
    async with running("distributed", options) as system:
        return await _measure(system, n, options, results)


def run(options: Options) -> list[Row]:
    return asyncio.run(_run(options))
