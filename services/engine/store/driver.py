"""The database driver's types, named once for the rest of the engine.

Where it sits: the leaf of `store/`. Only `services.engine.store` imports the
driver (asyncpg; an import-linter contract in pyproject.toml holds it), so
the engine's other modules name the pool they pass along (`Pool`) and the
rows the API's reads return (`Record`) through these aliases; the statement
mixins of `Tx` name its connection (`Conn`).
"""

from __future__ import annotations

from typing import TypeAlias

import asyncpg
from asyncpg.pool import PoolConnectionProxy

Conn: TypeAlias = asyncpg.Connection | PoolConnectionProxy
Pool: TypeAlias = asyncpg.Pool
Record: TypeAlias = asyncpg.Record
