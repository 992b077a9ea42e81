"""The Episodes tab: the list with its filters, semantic search, one episode, and row actions."""

from __future__ import annotations

from contextlib import suppress
from typing import Any
from urllib.parse import urlsplit

from django.contrib import messages
from django.http import HttpResponse, QueryDict
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import get_language
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_POST

from memconsole.memory import people, queries, roles, usage
from memconsole.memory.episodes import archive, delete, get_episode, restore
from memconsole.memory.errors import Unavailable
from memconsole.memory.errors import ValidationError as MemoryValidationError
from memconsole.memory.models import Episode, Scope, Status
from memconsole.memory.retrieval import retrieve
from memconsole.memory.scopes import ScopeKeys

from .. import forms
from ..access import ConsoleRequest, scope_view
from ..episode_forms import SpeakerForm
from ..people_forms import resolve_speaker_filter
from ..rows import episode_row, episode_table
from ..screens import next_url, render_screen, scope_context, user_permissions, wants_fragment

CHAIN_LIMIT = 20
USED_BY_LIMIT = 10
HISTORY_LIMIT = 50


def _search_or_list(request: ConsoleRequest, keys: ScopeKeys, form: forms.EpisodeFilterForm) -> dict[str, Any]:
    data = form.cleaned_data
    if form.searching:
        hits = retrieve(  # recall's own search, with every filter of the list (the usage one too)
            keys,
            data["q"],
            top_k=data.get("top_k") or forms.DEFAULT_TOP_K,
            statuses=form.statuses() or list(Status.values),
            tags=[data["tag"]] if data.get("tag") else None,
            actor=request.actor,
            **form.filters(),
        ).hits
        return {"hits": hits}
    page, count = queries.episode_page(
        keys,
        sort=form.chosen_sort,
        cursor=data.get("cursor") or None,
        limit=data.get("limit") or forms.DEFAULT_PAGE_SIZE,
        **form.list_filters(),
    )
    return {"page": page, "count": count, "position": _position(page)}


def _position(page: Any) -> dict[str, int] | None:
    """First and last row number of the page (1-based), when the page knows where it starts."""
    if page.start is None or not page.items:
        return None
    return {"first": page.start + 1, "last": page.start + len(page.items)}


def _results(request: ConsoleRequest, keys: ScopeKeys, form: forms.EpisodeFilterForm) -> tuple[dict[str, Any], int]:
    """The hits or the page, with the status; bad filters go on the form (400), and a search the
    index cannot answer keeps the page and its filters, with the reason (503)."""
    try:
        return _search_or_list(request, keys, form), 200
    except MemoryValidationError as exc:
        form.add_error(exc.field if exc.field in form.fields else None, exc.in_language())
        return {}, 400
    except Unavailable as exc:
        if exc.code != "vector_index":
            raise
        return {"index_error": exc.message}, 503


def _filters_cache_key(request: ConsoleRequest, scope: Scope, form: forms.EpisodeFilterForm) -> str | None:
    """What the rendered filter form depends on: the scope, the language, the time zone its labels
    name and the query without its cursor (so every page of one listing shares it). None when the
    form shows errors: not cached."""
    if form.errors:
        return None
    query = request.GET.copy()
    query.pop("cursor", None)
    return f"{scope.pk}|{get_language()}|{timezone.get_current_timezone_name()}|{query.urlencode()}"


@require_GET
@scope_view()
def episodes(request: ConsoleRequest, scope: Scope, keys: ScopeKeys) -> HttpResponse:
    query = request.GET.copy()
    # So that the page-size and number-of-results fields show what is used.
    query.setdefault("limit", str(forms.DEFAULT_PAGE_SIZE))
    query.setdefault("top_k", str(forms.DEFAULT_TOP_K))
    query.setdefault("used_days", str(usage.DEFAULT_USED_DAYS))  # the N of "used in the last N days"
    form = forms.EpisodeFilterForm(query)
    valid = form.is_valid() and resolve_speaker_filter(keys, form)  # a name or an id (people_forms.py)
    results, status = _results(request, keys, form) if valid else ({}, 400)
    context = scope_context(request, scope, keys, "episodes", form=form, bulk=forms.BulkActionForm(), **results)
    page = results.get("page")
    context.update(episode_table(scope.pk, context, page.items if page else (), results.get("hits") or ()))
    context["filter_query"] = _filter_query(request.GET)
    context["filters_cache_key"] = _filters_cache_key(request, scope, form)
    return render_screen(request, "console/episode_list.html", "console/_episode_list.html", context, status)


@require_GET
@scope_view()
def speaker_options(request: ConsoleRequest, scope: Scope, keys: ScopeKeys) -> HttpResponse:
    """The speaker picker's <option>s, fetched when the picker is first focused rather than with
    every Episodes page (hundreds of speakers would cost the page more than its 25 rows)."""
    return render(request, "console/_speaker_options.html", {"speakers": people.scope_people(keys)})


@require_GET
@scope_view()
def episode_detail(request: ConsoleRequest, scope: Scope, keys: ScopeKeys, episode_id: str) -> HttpResponse:
    episode = get_episode(keys, episode_id)
    context = scope_context(
        request,
        scope,
        keys,
        "episodes",
        episode=episode,
        newer=queries.newer_versions(keys, episode, CHAIN_LIMIT),
        replaces=queries.replaced_episodes(keys, episode, CHAIN_LIMIT),
        history=queries.episode_history(keys, episode.episode_id, HISTORY_LIMIT),
        usage=usage.episode_usage(keys, episode.episode_id, USED_BY_LIMIT),  # issue 18: which answers used it
        people=people.scope_people(keys),  # the speaker picker of "Reassign speaker" (episode_edit.py)
        speaker_form=SpeakerForm(initial={"version": episode.version}),
    )
    return render_screen(request, "console/episode_detail.html", "console/_episode_detail.html", context)


def _filter_query(query: QueryDict) -> str:
    """The list's query without its page and search: what "all that match" acts on."""
    query = query.copy()
    for name in ("cursor", "q", "top_k"):
        query.pop(name, None)
    return query.urlencode()


def _counts_oob(request: ConsoleRequest, scope: Scope, keys: ScopeKeys) -> str:
    """After an inline action, the scope header's counts and the list's (summary, position, "select
    all that match"), swapped out of band (htmx) from the same response as the row; the list's are
    those of the list in `next`."""
    context: dict[str, Any] = {"counts": queries.scope_counts(keys), "oob": True}
    back = next_url(request, "")
    query = QueryDict(urlsplit(back).query)
    form = forms.EpisodeFilterForm(query)
    if back and form.is_valid() and resolve_speaker_filter(keys, form) and not form.searching:
        with suppress(MemoryValidationError):  # a list whose filters no longer validate has no count to show
            context.update(form=form, **_search_or_list(request, keys, form))
            perms = user_permissions(request.user)
            context.update(can_act=perms["can_operate"] or perms["can_delete"], filter_query=_filter_query(query))
    return render_to_string("console/_episode_counts_oob.html", context, request=request)


def _row_response(
    request: ConsoleRequest, scope: Scope, keys: ScopeKeys, episode: Episode, message: str, undo: str = ""
) -> HttpResponse:
    """The re-rendered row for htmx, with the counts out of band (and an Undo after an archive or
    restore that was not itself an undo), else back to the list."""
    if wants_fragment(request):
        undo = "" if request.POST.get("undo") == "1" else undo
        row = episode_row(scope.pk, user_permissions(request.user), episode, flash=message, undo=undo)
        return HttpResponse(row + _counts_oob(request, scope, keys))
    messages.success(request, message)
    return redirect(next_url(request, reverse("console:episodes", args=[scope.pk])))


@require_POST
@scope_view(roles.OPERATE)
def episode_archive(request: ConsoleRequest, scope: Scope, keys: ScopeKeys, episode_id: str) -> HttpResponse:
    episode = get_episode(keys, episode_id)
    changed = archive(keys, request.actor, [episode.episode_id])
    episode = get_episode(keys, episode_id)  # as it is now
    if not changed:
        message = _("Nothing changed: episode %(id)s was already archived.") % {"id": episode.episode_id}
        return _row_response(request, scope, keys, episode, message)
    message = _("Episode %(id)s is archived.") % {"id": episode.episode_id}
    return _row_response(request, scope, keys, episode, message, undo="archive")


@require_POST
@scope_view(roles.OPERATE)
def episode_restore(request: ConsoleRequest, scope: Scope, keys: ScopeKeys, episode_id: str) -> HttpResponse:
    episode = get_episode(keys, episode_id)
    # Undoing a restore archives again: only a restore from archived has an undo (not one from superseded).
    undo = "restore" if episode.effective_status == Status.ARCHIVED else ""
    changed = restore(keys, request.actor, [episode.episode_id])
    episode = get_episode(keys, episode_id)  # as it is now
    if not changed:  # already active (a second tab, a double click): nothing written, nothing to undo
        message = _("Nothing changed: episode %(id)s was already active.") % {"id": episode.episode_id}
        return _row_response(request, scope, keys, episode, message)
    message = _("Episode %(id)s is active again.") % {"id": episode.episode_id}
    return _row_response(request, scope, keys, episode, message, undo=undo)


def _confirm_delete(request: ConsoleRequest, scope: Scope, keys: ScopeKeys, episode: Episode) -> HttpResponse:
    """Without JavaScript, a page asks before deleting (htmx asks with hx-confirm)."""
    back = next_url(request, reverse("console:episodes", args=[scope.pk]))
    context = scope_context(request, scope, keys, "episodes", episode=episode, next=back)
    return render_screen(
        request, "console/episode_confirm_delete.html", "console/_episode_confirm_delete.html", context
    )


@require_POST
@scope_view(roles.DELETE)
def episode_delete(request: ConsoleRequest, scope: Scope, keys: ScopeKeys, episode_id: str) -> HttpResponse:
    """Deletes after a confirmation, then goes back where the user was (not to the deleted episode)."""
    episode = get_episode(keys, episode_id)
    if request.POST.get("confirmed") != "1":
        return _confirm_delete(request, scope, keys, episode)
    delete(keys, request.actor, [episode.episode_id])
    message = _("Episode %(id)s was deleted.") % {"id": episode.episode_id}
    if wants_fragment(request):
        row = render_to_string(
            "console/_episode_row_deleted.html", {"episode": episode, "flash": message}, request=request
        )
        return HttpResponse(row + _counts_oob(request, scope, keys))
    messages.success(request, message)
    episodes_url = reverse("console:episodes", args=[scope.pk])
    back = next_url(request, episodes_url)
    if reverse("console:episode_detail", args=[scope.pk, episode.episode_id]) in back:
        back = episodes_url
    return redirect(back)
