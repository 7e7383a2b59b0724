"""Converge's benchmark suite (`make bench`); separate from the tests.

Each module `bench/<name>.py` exposes `run() -> list[dict]`, one row per
figure: `{"name", "value", "unit", "target"}` (target as text, e.g. "< 1").
"""
