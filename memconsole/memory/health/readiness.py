"""Readiness: are the database and the vector index reachable right now? Cheap enough for a load
balancer's probe every few seconds (no canaries, no scans: see runner.py for the full check)."""

from __future__ import annotations

import logging

from django.db import connection

from memconsole.lib import vectors

log = logging.getLogger("memconsole.probes")


def database_ready() -> bool:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception:  # any driver or connection error means not ready, whatever its class
        log.warning("readyz: database unreachable", exc_info=True)
        return False
    return True


def index_ready() -> bool:
    try:
        vectors.heartbeat()
    except vectors.VectorIndexError:
        log.warning("readyz: vector index unreachable", exc_info=True)
        return False
    return True


def readiness() -> dict[str, bool]:
    """Each dependency by name, True when it answers."""
    return {"database": database_ready(), "vector_index": index_ready()}
