"""The engine's HTTP surface: Heat v1 API (later issues), health and metrics."""
