"""The overview: the memory spaces the user may see, and deriving a space's keys to open it."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import Http404, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_POST, require_safe
from django_htmx.http import HttpResponseClientRedirect

from memconsole.memory import editing, queries, roles, spaces
from memconsole.memory.models import Scope
from memconsole.memory.paging import KeysetPage
from memconsole.memory.scopes import ScopeKeys, keys_of

from .. import forms
from ..access import ConsoleRequest, console_view, require_perm, scope_view
from ..episode_forms import EpisodeForm
from ..screens import bad_request, render_screen, user_permissions, wants_fragment

SCOPES_PER_PAGE = 25
DERIVE_TARGET = "derive-result"


def _scope_page(request: ConsoleRequest, search: forms.ScopeSearchForm) -> KeysetPage:
    """A page of spaces; each with `removable`: nothing stored in it (no episode, and no profile or
    snapshot of the chat either: what `spaces.remove_empty_scope` asks)."""
    data = search.cleaned_data
    page = queries.space_page(request.actor, data.get("q", "").strip(), data.get("cursor"), SCOPES_PER_PAGE)
    for scope in page.items:
        scope.removable = not scope.counts.total and not spaces.holds_memory(keys_of(scope))
    return page


def _derived(request: ConsoleRequest, derive: forms.DeriveForm) -> dict[str, Any] | None:
    keys = derive.cleaned_data["keys"]
    if not request.actor.may_use_bot(keys.bot_uuid):
        derive.add_error("bot_uuid", _("You do not have access to this bot's memory."))
        return None
    return {"keys": keys, "scope": queries.registered_scope(keys), "counts": queries.stored_counts(keys)}


@require_safe  # GET, and HEAD for uptime monitors
@console_view()
def overview(request: ConsoleRequest) -> HttpResponse:
    search = forms.ScopeSearchForm(request.GET)
    derive = forms.DeriveForm(request.GET if "session_name" in request.GET else None)
    page = _scope_page(request, search) if search.is_valid() else None
    derived = _derived(request, derive) if derive.is_valid() else None
    status = 400 if not search.is_valid() or (derive.is_bound and derived is None) else 200
    context = {"search": search, "derive": derive, "page": page, "derived": derived, **user_permissions(request.user)}
    fragment = "console/_derive.html" if request.htmx.target == DERIVE_TARGET else "console/_scope_list.html"
    return render_screen(request, "console/overview.html", fragment, context, status)


def _new_space(request: ConsoleRequest, keys: ScopeKeys, form: EpisodeForm, status: int = 200) -> HttpResponse:
    """A space with nothing stored has no row yet: this page offers to write its first episode."""
    context = {"keys": keys, "form": form, "people": [], **user_permissions(request.user)}
    return render_screen(request, "console/scope_new.html", "console/_scope_new.html", context, status)


@require_POST
@console_view()
def scope_open(request: ConsoleRequest) -> HttpResponse:
    """Open a derived space: its row, or (a new chat of a memory that holds something) a new row,
    audited; a space with nothing stored gets no row: its page offers to add the first episode."""
    derive = forms.DeriveForm(request.POST)
    if not derive.is_valid():
        search = forms.ScopeSearchForm({})
        page = _scope_page(request, search) if search.is_valid() else None  # the list stays as it was
        context: dict[str, Any] = {"search": search, "derive": derive, "page": page, "derived": None}
        context.update(user_permissions(request.user))
        return render_screen(request, "console/overview.html", "console/_derive.html", context, 400)
    keys = derive.cleaned_data["keys"]
    if not request.actor.may_use_bot(keys.bot_uuid):
        raise Http404("No such memory space.")
    scope = queries.registered_scope(keys)
    if scope is None:
        require_perm(request.user, roles.OPERATE)
        scope = spaces.open_scope(keys, request.actor)
    if scope is None:
        return _new_space(request, keys, EpisodeForm(initial={"importance": 2}))
    return redirect("console:episodes", scope_id=scope.pk)


@require_POST
@console_view(roles.OPERATE)
def space_first_episode(request: ConsoleRequest) -> HttpResponse:
    """The first episode of a space that has no row yet: stored (source `console`), which registers it."""
    derive = forms.DeriveForm(request.POST)
    if not derive.is_valid():
        return bad_request(request, _("The memory space is not valid: derive it again."))
    keys = derive.cleaned_data["keys"]
    if not request.actor.may_use_bot(keys.bot_uuid):
        raise Http404("No such memory space.")
    form = EpisodeForm(request.POST)
    if not form.is_valid():
        return _new_space(request, keys, form, 400)
    data = form.changes()
    result = editing.add_episode(
        keys,
        request.actor,
        data["content"],
        tags=data["tags"],
        importance=data["importance"],
        kind=data["kind"],
        sender_id=data["sender_id"],
        sender_name=data["sender_name"],
        timestamp=data.get("timestamp"),
    )
    scope = queries.registered_scope(keys)
    messages.success(request, _("Episode %(id)s added.") % {"id": result.episode.episode_id})
    if scope is None:  # cannot happen: remember registers the space
        return redirect("console:overview")
    return redirect("console:episode_detail", scope_id=scope.pk, episode_id=result.episode.episode_id)


@require_POST
@scope_view(roles.DELETE)
def scope_remove(request: ConsoleRequest, scope: Scope, keys: ScopeKeys) -> HttpResponse:
    """Remove an empty space's row (admin role; audited). A space holding anything is refused (400)."""
    spaces.remove_empty_scope(scope, request.actor)
    messages.success(request, _("The empty memory space %(name)s was removed.") % {"name": scope.session_name})
    if wants_fragment(request):
        return HttpResponseClientRedirect(reverse("console:overview"))
    return redirect("console:overview")


@require_GET
@scope_view()
def scope_home(request: ConsoleRequest, scope: Scope, keys: ScopeKeys) -> HttpResponse:
    return redirect("console:episodes", scope_id=scope.pk)
