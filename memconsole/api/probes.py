"""Liveness and readiness probes for load balancers and orchestrators: no login, no data.

`/healthz` answers as long as the process serves requests (it touches nothing else).
`/readyz` answers 200 only when the database and the vector index are reachable, 503 otherwise;
it names which dependency failed but never how (errors go to the log, not to the caller). An
encrypted install started without MEMCONSOLE_FERNET_KEYS is not ready either: `encryption_key` is
"missing" and `reason` says which setting to configure.
"""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from memconsole.memory.health.readiness import embedding_status, encryption_key_problem, index_backlog, readiness


@never_cache
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"status": "ok"})


@never_cache
@require_GET
def readyz(request: HttpRequest) -> JsonResponse:
    checks = {name: "ok" if ready else "unavailable" for name, ready in readiness().items()}
    body: dict[str, object] = {"checks": checks}
    if checks["database"] == "ok" and (problem := encryption_key_problem()):
        checks["encryption_key"] = "missing"
        body["reason"] = problem
    if checks["database"] == "ok" and (embedding := embedding_status()):
        body["embeddings"] = embedding  # the model answering recall; a model switch's progress
    if checks["database"] == "ok" and (backlog := index_backlog()):
        body["index_backlog"] = backlog  # vectors the write-behind indexer has not written yet
    ready = all(state == "ok" for state in checks.values())
    return JsonResponse({"status": "ok" if ready else "unavailable", **body}, status=200 if ready else 503)
