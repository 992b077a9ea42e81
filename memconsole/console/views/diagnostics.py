"""Diagnostics: the latest health check, its history, and running it again."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_POST

from memconsole.memory import health, queries, roles

from .. import forms
from ..access import ConsoleRequest, console_view, scope_from_query
from ..screens import bad_request, render_screen, user_permissions, wants_fragment

HEALTH_HISTORY = 20


def _diagnostics_context(request: ConsoleRequest, cursor: str | None = None) -> dict[str, Any]:
    return {
        "latest": queries.latest_health_run(),
        "runs": queries.health_run_page(cursor, HEALTH_HISTORY),
        "scope": scope_from_query(request),
        "tab": "diagnostics",
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


@require_POST
@console_view(roles.OPERATE)
def diagnostics_run(request: ConsoleRequest) -> HttpResponse:
    health.run_health_check(request.actor)
    if wants_fragment(request):
        return render(request, "console/_health.html", _diagnostics_context(request))
    messages.success(request, _("The health check has run; its results are below."))
    return redirect("console:diagnostics")
