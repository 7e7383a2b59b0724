"""The engine's storage edge: every SQL statement Converge runs lives here,
but the outbox relay's (`services.engine.outbox`: deleting published rows and
finding those left by dead engines).

`connect` opens the asyncpg pool (wrapping driver errors), `embedded` starts
the pgserver PostgreSQL used by `converge up`, `migrate` applies the ordered
SQL files in `migrations/`, and `Store` is the gateway core code talks to.
"""

from services.engine.store.db import Store, connect
from services.engine.store.lifecycle import open_database

__all__ = ["Store", "connect", "open_database"]
