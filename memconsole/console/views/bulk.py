"""Bulk actions on the Episodes tab: archive, restore or delete the selected episodes."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import ngettext
from django.views.decorators.http import require_POST
from django_htmx.http import trigger_client_event

from memconsole.memory import queries, roles
from memconsole.memory.audit import Actor
from memconsole.memory.episodes import archive, delete, restore
from memconsole.memory.models import Scope, Status
from memconsole.memory.scopes import ScopeKeys

from .. import forms
from ..access import ConsoleRequest, require_perm, scope_view
from ..screens import next_url, render_screen, scope_context, wants_fragment

BULK_PERMISSIONS = {"archive": roles.OPERATE, "restore": roles.OPERATE, "delete": roles.DELETE}
# The status an action leaves an episode in: those already in it do not change.
BULK_RESULT = {"archive": Status.ARCHIVED, "restore": Status.ACTIVE}


def _preview(keys: ScopeKeys, action: str, ids: list[str]) -> dict[str, Any]:
    """How many of the selected episodes exist in the scope and how many the action would change."""
    found = queries.episode_statuses(keys, ids)
    changing = [i for i in ids if i in found and found[i] != BULK_RESULT.get(action)]
    return {"selected": len(ids), "found": [i for i in ids if i in found], "changing": len(changing)}


def _apply(keys: ScopeKeys, actor: Actor, action: str, ids: list[str]) -> str:
    """Runs the action; the message saying how many episodes it changed."""
    if action == "delete":
        changed = delete(keys, actor, ids)
        return ngettext("%(n)d episode deleted.", "%(n)d episodes deleted.", changed) % {"n": changed}
    if action == "archive":
        changed = len(archive(keys, actor, ids))
        return ngettext("%(n)d episode archived.", "%(n)d episodes archived.", changed) % {"n": changed}
    changed = len(restore(keys, actor, ids))
    return ngettext("%(n)d episode restored.", "%(n)d episodes restored.", changed) % {"n": changed}


@require_POST
@scope_view()
def episodes_bulk(request: ConsoleRequest, scope: Scope, keys: ScopeKeys) -> HttpResponse:
    """The first post previews how many would change, the confirmed second one acts."""
    form = forms.BulkActionForm(request.POST)
    back = next_url(request, reverse("console:episodes", args=[scope.pk]))
    context = scope_context(request, scope, keys, "episodes", bulk=form, next=back)
    if not form.is_valid():
        return render_screen(request, "console/bulk_confirm.html", "console/_bulk_preview.html", context, 400)
    action, ids = form.cleaned_data["action"], form.cleaned_data["episode_ids"]
    require_perm(request.user, BULK_PERMISSIONS[action])
    preview = _preview(keys, action, ids)
    if not form.cleaned_data["confirmed"] or not preview["found"]:
        context.update(preview=preview, action=action, ids=preview["found"])
        return render_screen(request, "console/bulk_confirm.html", "console/_bulk_preview.html", context)
    message = _apply(keys, request.actor, action, preview["found"])
    if wants_fragment(request):
        return trigger_client_event(render(request, "console/_bulk_done.html", {"flash": message}), "episodesChanged")
    messages.success(request, message)
    return redirect(back)
