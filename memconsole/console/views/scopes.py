"""The overview: the memory spaces the user may see, and deriving a space's keys to open it."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.http import Http404, HttpResponse
from django.shortcuts import redirect
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_POST, require_safe

from memconsole.memory import audit, queries, roles
from memconsole.memory.audit import Actor
from memconsole.memory.models import Scope
from memconsole.memory.paging import KeysetPage
from memconsole.memory.scopes import ScopeKeys, register_scope

from .. import forms
from ..access import ConsoleRequest, console_view, require_perm, scope_view
from ..screens import render_screen, user_permissions

SCOPES_PER_PAGE = 25
DERIVE_TARGET = "derive-result"


def _scope_page(request: ConsoleRequest, search: forms.ScopeSearchForm) -> KeysetPage:
    data = search.cleaned_data
    return queries.scope_page(request.actor, data.get("q", "").strip(), data.get("cursor"), SCOPES_PER_PAGE)


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


def _register_opened(keys: ScopeKeys, actor: Actor) -> Scope:
    """Registers a space opened in the console for the first time, with its audit entry."""
    with transaction.atomic():
        scope = register_scope(keys)
        audit.append(
            "scope_open",
            actor,
            scope_key=keys.scope_key,
            user_key=keys.user_key,
            target_type="scope",
            target_id=str(scope.pk),
            summary="memory space opened in the console",
            after={"bot_uuid": keys.bot_uuid, "session_name": keys.session_name, "isolation": keys.isolation},
        )
    return scope


@require_POST
@console_view()
def scope_open(request: ConsoleRequest) -> HttpResponse:
    """Open a derived space: register it (audited) when it was never seen, then go to its episodes."""
    derive = forms.DeriveForm(request.POST)
    if not derive.is_valid():
        context: dict[str, Any] = {"search": forms.ScopeSearchForm(), "derive": derive, "page": None, "derived": None}
        context.update(user_permissions(request.user))
        return render_screen(request, "console/overview.html", "console/_derive.html", context, 400)
    keys = derive.cleaned_data["keys"]
    if not request.actor.may_use_bot(keys.bot_uuid):
        raise Http404("No such memory space.")
    scope = queries.registered_scope(keys)
    if scope is None:
        require_perm(request.user, roles.OPERATE)
        scope = _register_opened(keys, request.actor)
    return redirect("console:episodes", scope_id=scope.pk)


@require_GET
@scope_view()
def scope_home(request: ConsoleRequest, scope: Scope, keys: ScopeKeys) -> HttpResponse:
    return redirect("console:episodes", scope_id=scope.pk)
