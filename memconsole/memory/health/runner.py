"""One health run: every check in order, the result stored (`HealthRun`) and audited."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext_noop

from .. import audit, modelswitch
from ..audit import Actor
from ..models import HealthRun
from ..scopes import unregistered_scopes
from ..wording import said
from . import backlog, checks, erasures, integrity
from .cleanup import cleanup, sweep_leftovers
from .probe import PROBE_CHECKS, Canaries, new_canaries, run_probe_checks
from .result import OK, Check, HealthResult, failure, safely, worst

log = logging.getLogger("memconsole.health")

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
    "index_backlog",
    "audit_chain",
    "row_integrity",
    "encryption",
    "erasure",
)
HEALTH_RUNS_KEPT = 1000


def run_health_check(
    actor: Actor, *, store: bool = True, on_canaries: Callable[[Canaries], None] | None = None
) -> dict[str, Any]:
    """Run every check and return the result (`HealthResult.as_dict()`: `{status, checks: [{id,
    status, detail, fix?}], checked_at, duration_ms}`). Never raises for a failing check: a check
    that raises is reported as ERROR with what it raised.

    `store=False` skips the HealthRun row (the run is still audited). `on_canaries` is a test
    hook, never set in production: it is called with the `Canaries` once both are written and
    before any read check, so that tests can tamper with the index mid-probe; if it raises, the
    probe still cleans up and the exception propagates.
    """
    with modelswitch.observing():  # a check run with other settings than the server's records no switch
        return _run_checks(actor, store, on_canaries)


def _run_checks(actor: Actor, store: bool, on_canaries: Callable[[Canaries], None] | None) -> dict[str, Any]:
    started = time.monotonic()
    checked_at = timezone.now()
    results: dict[str, Check] = {}
    results["database"] = safely("database", checks.check_database)
    results["vector_index"] = safely("vector_index", checks.check_vector_index)
    results["embedding"] = safely("embedding", checks.check_embedding)
    try:
        results.update(_run_probe(on_canaries))
    except Exception as exc:  # the probe could not start (the database is down): each of its checks says so
        log.exception("the health probe could not run")
        for check_id in ("write", *PROBE_CHECKS, "cleanup"):
            results.setdefault(check_id, failure(check_id, exc))
    results["index_drift"] = safely("index_drift", integrity.check_index_drift)
    results["index_backlog"] = safely("index_backlog", backlog.check_index_backlog)
    results["audit_chain"] = safely("audit_chain", integrity.check_audit_chain)
    results["row_integrity"] = safely("row_integrity", integrity.check_row_integrity)
    results["encryption"] = safely("encryption", integrity.check_encryption)
    results["erasure"] = safely("erasure", erasures.check_unfinished_erasures)
    ordered = [results[check_id] for check_id in CHECK_IDS]
    result = HealthResult(
        status=worst([check.status for check in ordered]),
        checks=ordered,
        checked_at=checked_at,
        duration_ms=int((time.monotonic() - started) * 1000),
    )
    _record(actor, result, store)
    return result.as_dict()


def latest_runs(limit: int = 20) -> list[HealthRun]:
    """The newest stored health runs, newest first (`.result` holds the full result)."""
    return list(HealthRun.objects.order_by("-checked_at", "-id")[:limit])


def _run_probe(on_canaries: Callable[[Canaries], None] | None) -> dict[str, Check]:
    out: dict[str, Check] = {}
    probe = new_canaries()
    with unregistered_scopes():
        try:
            sweep_leftovers()
            out.update(run_probe_checks(probe, on_canaries))
        finally:
            out["cleanup"] = cleanup(probe)
    return out


def _record(actor: Actor, result: HealthResult, store: bool) -> None:
    failing = [f"{c.id} {c.status}" for c in result.checks if c.status != OK]
    try:
        with transaction.atomic():
            run = None
            if store:
                run = HealthRun.objects.create(
                    checked_at=result.checked_at,
                    status=result.status,
                    duration_ms=result.duration_ms,
                    result=result.as_dict(),
                    actor=actor.label[:255],
                )
            audit.append(
                "health_check",
                actor,
                target_type="health_run",
                target_id=str(run.pk) if run else "",
                summary=said(
                    gettext_noop("health check: %(status)s (%(failing)s)")
                    if failing
                    else gettext_noop("health check: %(status)s"),
                    status=result.status,
                    failing=", ".join(failing),
                ),
                metadata={
                    "status": result.status,
                    "checks": {c.id: c.status for c in result.checks},
                    "duration_ms": result.duration_ms,
                },
            )
        if store:
            beyond = HealthRun.objects.order_by("-checked_at", "-id").values_list("pk", flat=True)[HEALTH_RUNS_KEPT:]
            expired = list(beyond)
            if expired:
                HealthRun.objects.filter(pk__in=expired).delete()
    except Exception:  # the database may be the very thing that is down
        log.exception("the health check result could not be stored")
