"""The engine's HTTP surface: the Heat v1 API under `/v1/{project_id}/...`, health and metrics.

`app.build_app` assembles it: health, metrics and discovery routes always,
and, when the API's dependencies are given, the routes of `stacks`,
`resources`, `snapshots` and the rest of this package behind the `errors` and
`auth` middlewares.
"""
