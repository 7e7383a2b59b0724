"""The engine's storage edge: every SQL statement Converge runs lives here,
and only here is the database driver imported (`Pool` and `Record` name its
types for the rest of the engine; an import-linter contract holds it).

`connect` opens the asyncpg pool (wrapping driver errors), `embedded` starts
the pgserver PostgreSQL used by `converge up`, `migrate` applies the ordered
SQL files in `migrations/`, and `Store` is the gateway core code talks to.
"""

from services.engine.store.db import Store, connect
from services.engine.store.driver import Pool, Record
from services.engine.store.lifecycle import open_database

__all__ = ["Pool", "Record", "Store", "connect", "open_database"]
