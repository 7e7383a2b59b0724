"""The Converge services: engine, worker, observer, and the `converge` CLI.

The three services never import each other, only `shared`; the CLI composes
them for `converge up`.
"""
