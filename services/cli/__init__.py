"""The `converge` command: `converge up` and (as the API grows) client commands.

It is the one place allowed to import every service, to compose them.
"""
