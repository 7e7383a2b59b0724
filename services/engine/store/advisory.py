"""The object key of a PostgreSQL advisory lock named by a uuid.

Where it sits: the store's advisory locks (the engine lease, `lease.py`; a
project's quota and a tree's limit, `tenancy.py`; an operation's claim of a
stack's rows, `resources.py`) each use a class of their own and this key, the
first 32 bits of the uuid they lock (`pg_advisory_*lock(class, key)`).
"""

from __future__ import annotations

import uuid


def uuid_key(value: uuid.UUID) -> int:
    """The advisory lock key of `value`: its first four bytes, as a signed int4."""
    return int.from_bytes(value.bytes[:4], "big", signed=True)
