"""What one benchmark run measures, from the command line or `CONVERGE_BENCH_*`.

Only `bench/__main__.py` builds `Options`; modules receive it. Rows are plain
dicts (they go to JSON as they are); `row()` and `not_run()` build them so
every row carries the same keys.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field, replace
from typing import Any

MODES = ("up", "distributed")
SHAPES = ("independent", "chain", "layered")
DEFAULT_SIZES = (1_000, 10_000, 100_000)
#: Sizes from this one up are costly: by default only their create, and only
#: for `large_shapes` (`--full` runs every phase of every shape).
LARGE = 100_000

Row = dict[str, Any]


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(part.replace("_", "")) for part in text.split(",") if part.strip())


def _names(text: str, allowed: tuple[str, ...], what: str) -> tuple[str, ...]:
    names = tuple(part.strip() for part in text.split(",") if part.strip())
    unknown = [name for name in names if name not in allowed]
    if unknown:
        raise ValueError(f"unknown {what} {', '.join(unknown)} (choose from {', '.join(allowed)})")
    return names


@dataclass(frozen=True)
class Options:
    """Knobs of a run; each says its unit."""

    sizes: tuple[int, ...] = DEFAULT_SIZES
    modes: tuple[str, ...] = MODES
    shapes: tuple[str, ...] = SHAPES
    #: PostgreSQL server (any database on it); a scratch database is made per case.
    database_url: str = "postgresql://postgres@127.0.0.1:5432/postgres"
    amqp_url: str = "amqp://guest:guest@127.0.0.1:5672/"
    engines: int = 2
    workers: int = 2
    observers: int = 1
    #: Preemption samples (updates sent while an operation runs).
    repeats: int = 20
    #: A case whose estimate (from the smaller size's rate) exceeds this is not run (seconds).
    max_case_seconds: float = 420.0
    #: A single create, update or delete gives up after this long (seconds).
    phase_timeout: float = 900.0
    #: Shapes and phases run at sizes >= LARGE; the rest is reported as not run, with an estimate.
    large_shapes: tuple[str, ...] = ("layered",)
    large_phases: tuple[str, ...] = ("create",)
    #: Whether to attach py-spy to the engine during the profiled create.
    profile: bool = True
    #: Where the JSON and Markdown results go ("": bench/results).
    results: str = ""
    #: Where the services' console scripts are ("": this checkout's, beside the running Python);
    #: another checkout's `.venv/bin` runs that checkout's code, for A/B runs (bench/quick.py).
    bin_dir: str = ""
    #: Extra environment of every service process (e.g. `CONVERGE_EVENT_LOOP` for an A/B run).
    service_env: dict[str, str] = field(default_factory=dict)
    #: A checkout (with its `.venv`) that `bench.baseline` measures beside this one ("": none).
    baseline: str = ""

    @classmethod
    def from_environment(cls, **overrides: Any) -> Options:
        env = os.environ.get
        values: dict[str, Any] = {
            "sizes": _ints(env("CONVERGE_BENCH_SIZES", "")) or DEFAULT_SIZES,
            "modes": _names(env("CONVERGE_BENCH_MODES", ""), MODES, "mode") or MODES,
            "shapes": _names(env("CONVERGE_BENCH_SHAPES", ""), SHAPES, "shape") or SHAPES,
            "database_url": env("CONVERGE_BENCH_DATABASE_URL") or cls.database_url,
            "amqp_url": env("CONVERGE_BENCH_AMQP_URL") or cls.amqp_url,
            "max_case_seconds": float(env("CONVERGE_BENCH_MAX_CASE_SECONDS") or cls.max_case_seconds),
            "results": env("CONVERGE_BENCH_RESULTS") or cls.results,
            "baseline": env("CONVERGE_BENCH_BASELINE") or cls.baseline,
        }
        values.update({key: value for key, value in overrides.items() if value is not None})
        return cls(**values)

    def describe(self) -> dict[str, Any]:
        return {
            "sizes": list(self.sizes),
            "modes": list(self.modes),
            "shapes": list(self.shapes),
            "distributed": {"engines": self.engines, "workers": self.workers, "observers": self.observers},
            "repeats": self.repeats,
            "max_case_seconds": self.max_case_seconds,
            "large": {"from": LARGE, "shapes": list(self.large_shapes), "phases": list(self.large_phases)},
            "baseline": self.baseline,
        }

    def full(self) -> Options:
        """Every phase of every shape at every size, with no case budget."""
        return replace(
            self,
            large_shapes=SHAPES,
            large_phases=("create", "update", "delete"),
            max_case_seconds=float("inf"),
        )


def parse_sizes(text: str) -> tuple[int, ...]:
    return _ints(text)


def parse_modes(text: str) -> tuple[str, ...]:
    return _names(text, MODES, "mode")


def parse_shapes(text: str) -> tuple[str, ...]:
    return _names(text, SHAPES, "shape")


def row(
    name: str,
    value: float | int | None,
    unit: str,
    *,
    mode: str = "",
    target: str = "",
    met: bool | None = None,
    note: str = "",
    **details: Any,
) -> Row:
    """One figure; `met` is None when there is no target."""
    return {
        "name": name,
        "mode": mode,
        "value": value,
        "unit": unit,
        "target": target,
        "met": met,
        "note": note,
        **details,
    }


def not_run(name: str, reason: str, *, mode: str = "", unit: str = "", target: str = "") -> Row:
    return row(name, None, unit, mode=mode, target=target, note=f"not run ({reason})")


def size_label(n: int) -> str:
    """A resource count as figures name it: 10k, or 20 below a thousand."""
    return f"{n // 1000}k" if n % 1000 == 0 else str(n)


def usual_size(options: Options) -> int:
    """The size a single-size benchmark measures: 10,000, or the largest asked if smaller."""
    return 10_000 if max(options.sizes) >= 10_000 else max(options.sizes)


def each_mode(
    options: Options, measure: Callable[[str, int, Options], Coroutine[Any, Any, list[Row]]]
) -> list[Row]:
    """`measure(mode, usual_size(options), options)` for each mode asked, one event loop each."""
    rows: list[Row] = []
    for mode in options.modes:
        print(f"  {mode} ...", flush=True)
        rows += asyncio.run(measure(mode, usual_size(options), options))
    return rows
