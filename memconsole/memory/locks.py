"""Named locks for writes that must not interleave although no row exists yet to lock: two
corrections by one speaker (each must see the other's episode to supersede it), two first writes of
one fact (both would insert it).

On PostgreSQL a transaction-scoped advisory lock per name (`pg_advisory_xact_lock`), taken first
in the transaction, before any row or audit head, and in name order, so that two writers never
wait on each other in a circle; it is released at commit or rollback. On SQLite every write
transaction is `BEGIN IMMEDIATE` (settings.py), which already serialises writers: nothing to take.
"""

from __future__ import annotations

from django.db import connection, transaction


def hold(*names: str) -> None:
    """Hold these named locks until the caller's `transaction.atomic()` ends."""
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("locks.hold must run inside transaction.atomic()")
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        for name in sorted(set(names)):
            cursor.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", [name])
