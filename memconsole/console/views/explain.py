"""Explaining an answer (issue 18), from its injection snapshot: replay the retrieval against
today's memory (read-only), and fix a memory the answer used (archive it or lower its importance,
with the reason in the audit log)."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_POST

from memconsole.memory import fixes, queries, replay, roles
from memconsole.memory.errors import Conflict
from memconsole.memory.errors import ValidationError as MemoryValidationError
from memconsole.memory.models import InjectionSnapshot, Scope
from memconsole.memory.scopes import ScopeKeys

from ..access import ConsoleRequest, scope_view
from ..explain_forms import SnapshotFixForm
from ..screens import render_screen, scope_context
from .injection import snapshot_screen


def _snapshot(keys: ScopeKeys, snapshot_id: str) -> InjectionSnapshot:
    snapshot = queries.find_snapshot(keys, snapshot_id)
    if snapshot is None:
        raise Http404("No such injection snapshot in this memory space.")
    return snapshot


@require_GET
@scope_view()
def snapshot_replay(request: ConsoleRequest, scope: Scope, keys: ScopeKeys, snapshot_id: str) -> HttpResponse:
    snapshot = _snapshot(keys, snapshot_id)
    result = replay.replay(keys, request.actor, snapshot)
    context = scope_context(request, scope, keys, "injection", snapshot=snapshot, replay=result)
    return render_screen(request, "console/snapshot_replay.html", "console/_snapshot_replay.html", context)


@require_POST
@scope_view(roles.OPERATE)
def snapshot_fix(request: ConsoleRequest, scope: Scope, keys: ScopeKeys, snapshot_id: str) -> HttpResponse:
    snapshot = _snapshot(keys, snapshot_id)
    form = SnapshotFixForm(request.POST)
    if not form.is_valid():
        why = next(iter(form.errors.get("reason", [])), _("Choose a fix and say why the memory is wrong."))
        return _fix_refused(request, scope, keys, snapshot, str(why))
    data = form.cleaned_data
    try:
        fix = fixes.fix_from_snapshot(
            keys, request.actor, snapshot, data["episode_id"], data["action"], data["reason"], data["version"]
        )
    except MemoryValidationError as exc:
        return _fix_refused(request, scope, keys, snapshot, exc.in_language())
    except Conflict:
        why = _("This memory changed since the page was shown (the fix may have been sent twice): nothing was done.")
        return _fix_refused(request, scope, keys, snapshot, str(why), 409)
    if fix.action == fixes.ARCHIVE:
        messages.success(request, _("Archived: the bot will not use this memory again until it is restored."))
    else:
        messages.success(request, _("Its importance is now %(importance)d.") % {"importance": fix.episode.importance})
    return redirect(reverse("console:injection_detail", args=[scope.pk, snapshot.snapshot_id]) + "#fix-heading")


def _fix_refused(
    request: ConsoleRequest, scope: Scope, keys: ScopeKeys, snapshot: InjectionSnapshot, why: str, status: int = 400
) -> HttpResponse:
    """400 (409 for a memory changed since): the snapshot's page again, the reason at the memory's
    fix form, what was typed kept."""
    posted = {name: request.POST.get(name, "") for name in ("episode_id", "action", "reason")}
    return snapshot_screen(request, scope, keys, snapshot, status, fix_error={**posted, "message": why})
