"""The database driver's types, named once for the rest of the engine.

Where it sits: the leaf of `store/`. Only `services.engine.store` imports the
driver (asyncpg; an import-linter contract in pyproject.toml holds it), so
the engine's other modules name the pool they pass along (`Pool`) and the
rows the API's reads return (`Record`) through these aliases; the statement
mixins of `Tx` name its connection (`Conn`). The pool's connections are
`PooledConnection`s (`store.db.connect`).
"""

from __future__ import annotations

from typing import TypeAlias, cast

import asyncpg
from asyncpg.pool import PoolConnectionProxy

Conn: TypeAlias = asyncpg.Connection | PoolConnectionProxy
Pool: TypeAlias = asyncpg.Pool
Record: TypeAlias = asyncpg.Record


class PooledConnection(asyncpg.Connection):
    """A pooled connection that is given back without the pool's reset when what it
    carried left nothing behind in the session (`given_back_clean`).

    asyncpg resets every connection given back to its pool with one more round trip
    (`pg_advisory_unlock_all(); CLOSE ALL; UNLISTEN *; RESET ALL`), which a batch paid
    between its commit and its publish. A committed `Store.transaction` leaves nothing
    that reset would undo: its locks are the transaction's (`pg_advisory_xact_lock`,
    row locks; the one session-level lock a batch tests, `claims_under_way`, is taken
    and let go of in one statement), its settings `SET LOCAL`, its cursors closed by
    the commit, and it listens to nothing; nor does the outbox's fast-path delete, one
    statement committed alone. Whatever else gives a connection back (the engine
    lease's session-level lock, a transaction that failed or was cancelled, any other
    statement) is reset as before: `get_reset_query` is asyncpg's hook for what the
    reset runs (tests/integration/test_store_connection_reset.py)."""

    _clean = False  # given back clean once; set per connection, cleared by its reset

    def given_back_clean(self) -> None:
        """What this connection carried since it was taken from the pool committed and
        left no session state: the next reset sends nothing."""
        self._clean = True

    def get_reset_query(self) -> str:
        clean, self._clean = self._clean, False
        return "" if clean else super().get_reset_query()


def given_back_clean(conn: Conn) -> None:
    """`conn` (a pooled connection, or the pool's proxy of one, which passes the call on)
    committed what it carried and left no session state: its pool need not reset it."""
    cast(PooledConnection, conn).given_back_clean()
