"""The health check (issue 6): can this memory be trusted? Work in progress: signatures first."""

from __future__ import annotations

from typing import Any

from .audit import Actor
from .models import HealthRun

OK, WARN, ERROR = "OK", "WARN", "ERROR"
CHECK_IDS = (
    "database",
    "vector_index",
    "embedding",
    "write",
    "search",
    "list",
    "get",
    "recall",
    "inject",
    "export",
    "delete",
    "cleanup",
    "index_drift",
    "audit_chain",
    "encryption",
)


def run_health_check(actor: Actor, *, store: bool = True, on_canaries: Any = None) -> dict[str, Any]:
    """Run every check; returns {status, checks: [{id, status, detail, fix?}], checked_at, duration_ms}."""
    raise NotImplementedError


def latest_runs(limit: int = 20) -> list[HealthRun]:
    """The newest stored health runs, newest first."""
    return list(HealthRun.objects.order_by("-checked_at", "-id")[:limit])
