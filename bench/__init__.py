"""Converge's benchmark suite (`make bench`); separate from the tests.

Each module `bench/<name>.py` with a top-level `run(options)` (or `run()`)
is a benchmark; it returns one row per figure, built by
`bench.harness.options.row` / `not_run`: name, mode, value, unit, target
(text, e.g. "< 1"), met, note. How to run it and what the figures mean:
docs/performance.md.
"""
