"""Bulk actions on the Episodes tab: archive, restore or delete the selected episodes, or every
episode the list's filters match. The first post previews (the first 50 episodes and the total),
the confirmed second one runs the action as one audited batch (`memory.bulk`): at once, or as a
background job with its progress page when it is more than one chunk (`bulk.IN_BACKGROUND_ABOVE`)."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpResponse, QueryDict
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST
from django_htmx.http import trigger_client_event

from memconsole.jobs.queue import submit
from memconsole.memory import bulk, jobs, roles
from memconsole.memory.models import Scope
from memconsole.memory.scopes import ScopeKeys

from .. import forms
from ..access import ConsoleRequest, require_perm, scope_view
from ..people_forms import resolve_speaker_filter
from ..screens import next_url, render_screen, scope_context, wants_fragment
from .jobs import BULK_DONE, busy, started

BULK_PERMISSIONS = {"archive": roles.OPERATE, "restore": roles.OPERATE, "delete": roles.DELETE}


def _filter_form(query: str) -> forms.EpisodeFilterForm:
    """The list's filter form from its query string (the same filters select the same episodes)."""
    data = QueryDict(query, mutable=True)
    for name in ("cursor", "q", "top_k", "sort"):
        data.pop(name, None)
    return forms.EpisodeFilterForm(data)


def _preview(keys: ScopeKeys, form: forms.BulkActionForm) -> bulk.Preview | None:
    """The preview, or None (with the reason on `form`) when the list's filters are not valid."""
    action = form.cleaned_data["action"]
    if not form.by_filter:
        return bulk.preview_selected(keys, action, form.cleaned_data["episode_ids"])
    filters = _filter_form(form.cleaned_data["filter_query"])
    # A speaker typed as a name selects the same rows as the list did (people_forms.py).
    if not (filters.is_valid() and resolve_speaker_filter(keys, filters)):
        form.add_error(None, _("The list's filters are not valid any more. Reload the list and try again."))
        return None
    return bulk.preview_matching(keys, action, filters.list_filters())


def _job_scope(keys: ScopeKeys) -> str:
    """What a bulk job works on: the memory space, which a bot's chats share under bot isolation."""
    return f"space:{keys.user_key}"


def _in_background(
    request: ConsoleRequest, scope: Scope, keys: ScopeKeys, action: str, ids: list[str], back: str
) -> HttpResponse:
    space = {"bot_uuid": scope.bot_uuid, "session_name": scope.session_name, "isolation": scope.isolation}
    try:
        job = submit(
            jobs.BULK,
            scope=_job_scope(keys),
            bot_uuid=scope.bot_uuid,
            actor=request.actor,
            params={**space, "scope_id": scope.pk, "action": action, "episode_ids": ids, "back": back},
        )
    except jobs.JobBusy as exc:
        return busy(request, exc)
    return started(request, job)


@require_POST
@scope_view(roles.OPERATE)  # the least any bulk action needs: a viewer is refused before the form is read
def episodes_bulk(request: ConsoleRequest, scope: Scope, keys: ScopeKeys) -> HttpResponse:
    """The first post previews, the confirmed second one acts (when what matches is still what the
    preview showed: otherwise it previews again)."""
    form = forms.BulkActionForm(request.POST)
    back = next_url(request, reverse("console:episodes", args=[scope.pk]))
    context: dict[str, Any] = scope_context(request, scope, keys, "episodes", bulk=form, next=back)
    if not form.is_valid():
        return render_screen(request, "console/bulk_confirm.html", "console/_bulk_preview.html", context, 400)
    action = form.cleaned_data["action"]
    require_perm(request.user, BULK_PERMISSIONS[action])
    preview = _preview(keys, form)
    if preview is None:
        return render_screen(request, "console/bulk_confirm.html", "console/_bulk_preview.html", context, 400)
    expected = request.POST.get("expected", "")
    unchanged = not form.by_filter or expected == str(preview.total)
    if not form.cleaned_data["confirmed"] or not preview.ids or not unchanged:
        context.update(
            preview=preview, action=action, changed_since=bool(form.cleaned_data["confirmed"]) and not unchanged
        )
        return render_screen(request, "console/bulk_confirm.html", "console/_bulk_preview.html", context)
    if len(preview.ids) > bulk.IN_BACKGROUND_ABOVE:  # a long run: a job, whose page shows its progress
        return _in_background(request, scope, keys, action, preview.ids, back)
    try:  # never beside a bulk job on the same memory space: its count would include this run's work
        jobs.require_none_active(jobs.BULK, _job_scope(keys))
    except jobs.JobBusy as exc:
        return busy(request, exc)
    outcome = bulk.run(keys, request.actor, action, preview.ids)
    message = BULK_DONE[action](outcome.changed) % {"n": outcome.changed}
    audit_url = f"{reverse('console:audit', args=[scope.pk])}?batch={outcome.batch_id}"
    if wants_fragment(request):
        done = render(request, "console/_bulk_done.html", {"flash": message, "audit_url": audit_url})
        return trigger_client_event(done, "episodesChanged")
    messages.success(request, message)
    return redirect(back)
