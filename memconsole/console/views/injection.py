"""The Injection tab: the memory blocks recorded for the bot, newest first, and one snapshot."""

from __future__ import annotations

from typing import Any

from django.http import Http404, HttpResponse
from django.views.decorators.http import require_GET

from memconsole.memory import fixes, queries
from memconsole.memory import injection as injections
from memconsole.memory.models import InjectionSnapshot, Scope
from memconsole.memory.scopes import ScopeKeys

from .. import forms
from ..access import ConsoleRequest, scope_view
from ..screens import bad_request, render_screen, scope_context

SNAPSHOTS_PER_PAGE = 20


@require_GET
@scope_view()
def injection(request: ConsoleRequest, scope: Scope, keys: ScopeKeys) -> HttpResponse:
    form = forms.PageForm(request.GET)
    if not form.is_valid():
        return bad_request(request, str(forms.CURSOR_ERROR))
    page = queries.snapshot_page(keys, form.cleaned_data.get("cursor"), SNAPSHOTS_PER_PAGE)
    context = scope_context(request, scope, keys, "injection", page=page, latest=queries.latest_snapshot(keys))
    return render_screen(request, "console/injection_list.html", "console/_injection_history.html", context)


@require_GET
@scope_view()
def injection_detail(request: ConsoleRequest, scope: Scope, keys: ScopeKeys, snapshot_id: str) -> HttpResponse:
    snapshot = queries.find_snapshot(keys, snapshot_id)
    if snapshot is None:
        raise Http404("No such injection snapshot in this memory space.")
    return snapshot_screen(request, scope, keys, snapshot)


def snapshot_screen(
    request: ConsoleRequest,
    scope: Scope,
    keys: ScopeKeys,
    snapshot: InjectionSnapshot,
    status: int = 200,
    fix_error: dict[str, Any] | None = None,
) -> HttpResponse:
    """A snapshot's page; `fix_error` (a refused fix: its episode, action, reason and why) is shown
    at that memory's fix form with what was typed."""
    decision = injections.explain_snapshot(keys, snapshot)  # injected beside near misses
    context = scope_context(
        request,
        scope,
        keys,
        "injection",
        snapshot=snapshot,
        decision=decision,
        fix_error=fix_error or {},
        current=fixes.current_states(keys, snapshot),
    )
    return render_screen(request, "console/injection_detail.html", "console/_snapshot_panel.html", context, status)
