"""Readiness: are the database and the vector index reachable right now, and does an encrypted install
have its key? Cheap enough for a load balancer's probe every few seconds (no canaries, no scans: see
runner.py for the full check)."""

from __future__ import annotations

import logging

from django.db import connection

from memconsole.lib import crypto, vectors

from .. import modelswitch, pending, reembed
from ..errors import EncryptionKeyMissing
from ..install import InstallState

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


def encryption_key_problem() -> str | None:
    """Why this process must not serve (an encrypted install without a key that opens it), or None.

    With keys configured, the install is recorded as encrypted here (once per process), so that a
    later start without them refuses even before any row was sealed.
    """
    try:
        InstallState.require_key()  # no key, or keys that open none of the install's data
        if crypto.enabled():
            InstallState.mark_encrypted()
    except EncryptionKeyMissing as exc:
        return exc.message
    except Exception:  # the database check reports an unreachable database; nothing more to say here
        log.warning("readyz: install state unreadable", exc_info=True)
    return None


def embedding_status() -> dict[str, object] | None:
    """During a model switch, the model answering recall and how far the re-embedding is (its
    background thread starts here on first need); None otherwise, or when it cannot be read."""
    try:
        reembed.ensure_running()
        state = modelswitch.current()
        return modelswitch.status(state) if state.switching else None
    except Exception:  # an unreadable state or model never makes /readyz fail: the checks above say why
        log.warning("readyz: embedding state unreadable", exc_info=True)
        return None


def index_backlog() -> dict[str, object] | None:
    """Vectors waiting for the write-behind indexer (memory/pending.py), when any: how many, and
    how long the oldest has waited; None when none waits or it cannot be read."""
    try:
        waiting = pending.backlog()
    except Exception:  # never makes /readyz fail: the database check says why
        log.warning("readyz: pending vectors unreadable", exc_info=True)
        return None
    if not waiting.count:
        return None
    return {"pending": waiting.count, "oldest_seconds": round(waiting.oldest_seconds, 1)}
