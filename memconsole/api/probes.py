"""Liveness and readiness probes for load balancers and orchestrators: no login, no data.

`/healthz` answers as long as the process serves requests (it touches nothing else).
`/readyz` answers 200 only when the database and the vector index are reachable, 503 otherwise;
it names which dependency failed but never how (errors go to the log, not to the caller).
"""

from __future__ import annotations

import logging

from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from memconsole.lib import vectors

log = logging.getLogger("memconsole.probes")


@never_cache
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"status": "ok"})


def _database_ready() -> bool:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception:  # any driver error means not ready
        log.warning("readyz: database unreachable", exc_info=True)
        return False
    return True


def _index_ready() -> bool:
    try:
        vectors.heartbeat()
    except vectors.VectorIndexError:
        log.warning("readyz: vector index unreachable", exc_info=True)
        return False
    return True


@never_cache
@require_GET
def readyz(request: HttpRequest) -> JsonResponse:
    checks = {
        "database": "ok" if _database_ready() else "unavailable",
        "vector_index": "ok" if _index_ready() else "unavailable",
    }
    ready = all(state == "ok" for state in checks.values())
    return JsonResponse({"status": "ok" if ready else "unavailable", "checks": checks}, status=200 if ready else 503)
