"""Diagnostics: the latest health check, its history, running it again and repairing the index
(both as background jobs: the request answers at once with the job's page)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.http import HttpResponse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_POST

from memconsole.jobs.queue import submit
from memconsole.memory import jobs, queries, roles

from .. import forms
from ..access import ConsoleRequest, console_view, scope_from_query
from ..screens import bad_request, render_screen, user_permissions
from .jobs import KIND_PERMISSIONS, busy, started

HEALTH_HISTORY = 20
RECENT_JOBS = 10


def _diagnostics_context(request: ConsoleRequest, cursor: str | None = None) -> dict[str, Any]:
    return {
        "latest": queries.latest_health_run(),
        "runs": queries.health_run_page(cursor, HEALTH_HISTORY),
        "scope": scope_from_query(request),
        "tab": "diagnostics",
        # The jobs this user may open (a viewer is not shown an import it would get a 403 for).
        "recent_jobs": [
            job
            for job in jobs.recent_for(request.actor, RECENT_JOBS * 3)
            if request.user.has_perm(KIND_PERMISSIONS.get(job.kind, roles.USERS))
        ][:RECENT_JOBS],
        "all_bots": request.actor.bot_uuids is None,  # the install-wide repairs are theirs to start
        "encryption_keys": bool(settings.MEMCONSOLE_FERNET_KEYS),  # re-encryption needs a key to seal with
        **user_permissions(request.user),
    }


@require_GET
@console_view()
def diagnostics(request: ConsoleRequest) -> HttpResponse:
    form = forms.PageForm(request.GET)
    if not form.is_valid():
        return bad_request(request, str(forms.CURSOR_ERROR))
    context = _diagnostics_context(request, form.cleaned_data.get("cursor"))
    return render_screen(request, "console/diagnostics.html", "console/_health.html", context)


def _start(request: ConsoleRequest, kind: str, params: dict[str, Any]) -> HttpResponse:
    try:
        job = submit(kind, scope="", bot_uuid="", actor=request.actor, params=params)
    except jobs.JobBusy as exc:
        return busy(request, exc)
    return started(request, job)


@require_POST
@console_view(roles.OPERATE)
def diagnostics_run(request: ConsoleRequest) -> HttpResponse:
    return _start(request, jobs.HEALTH, {})


@require_POST
@console_view(roles.OPERATE)
def diagnostics_reindex(request: ConsoleRequest) -> HttpResponse:
    """Repair the vector index (every scope: only for users not limited to some bots)."""
    if request.actor.bot_uuids is not None:
        raise PermissionDenied
    return _start(request, jobs.REINDEX, {"check_only": False})


@require_POST
@console_view(roles.OPERATE)
def diagnostics_reembed(request: ConsoleRequest) -> HttpResponse:
    """Finish a switch of embedding model now, as a job (users not limited to some bots)."""
    if request.actor.bot_uuids is not None:
        raise PermissionDenied
    return _start(request, jobs.REEMBED, {})


@require_POST
@console_view(roles.USERS)
def diagnostics_rotate(request: ConsoleRequest) -> HttpResponse:
    """Re-encrypt everything under the newest key (administrators not limited to some bots)."""
    if request.actor.bot_uuids is not None:
        raise PermissionDenied
    if not settings.MEMCONSOLE_FERNET_KEYS:
        return bad_request(request, _("Nothing to re-encrypt under: set MEMCONSOLE_FERNET_KEYS (newest key first)."))
    return _start(request, jobs.ROTATION, {})
