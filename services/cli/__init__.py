"""The `converge` command: `converge up` and the client commands (`stack`, `resource`, ...).

`up` composes every service in one process, so `up.py` is the one place
allowed to import them all; the client commands (`commands/`) talk to the
API over HTTP only, through `client.ApiClient`.
"""
