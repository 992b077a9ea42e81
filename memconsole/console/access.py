"""Who may see and do what in the console, and how a screen answers full or htmx requests.

A scope outside the user's bot grants is answered with 404 (its existence is never confirmed);
a role that is too low for an action gets 403.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.cache import patch_vary_headers
from django.views.decorators.cache import never_cache

from memconsole.memory import roles
from memconsole.memory.audit import Actor
from memconsole.memory.models import Scope
from memconsole.memory.scopes import ScopeKeys, keys_of


def require_perm(user: Any, perm: str) -> None:
    """403 unless the user's role carries `perm`."""
    if not user.has_perm(perm):
        raise PermissionDenied


def visible_scopes(user: Any) -> QuerySet[Scope]:
    """The Scope rows this user may see (all of them, or those of their granted bots)."""
    allowed = roles.allowed_bots(user)
    scopes = Scope.objects.all()
    if allowed is not None:
        scopes = scopes.filter(bot_uuid__in=allowed)
    return scopes


def may_use_bot(user: Any, bot_uuid: str) -> bool:
    allowed = roles.allowed_bots(user)
    return allowed is None or bot_uuid in allowed


def actor_for(request: HttpRequest) -> Actor:
    return Actor.for_user(request.user, roles.allowed_bots(request.user))


def get_scope(request: HttpRequest, scope_id: int, perm: str = roles.VIEW) -> tuple[Scope, ScopeKeys]:
    """The scope and its keys; 403 without viewing rights, 404 outside the grants, then 403 for `perm`."""
    require_perm(request.user, roles.VIEW)
    scope = visible_scopes(request.user).filter(pk=scope_id).first()
    if scope is None:
        raise Http404("No such memory space.")
    require_perm(request.user, perm)
    return scope, keys_of(scope)


def console_view(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Login required, never cached, varied on HX-Request (full page and fragment share a URL)."""

    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        response = view(request, *args, **kwargs)
        patch_vary_headers(response, ("HX-Request",))
        return response

    return login_required(never_cache(wrapped))


def scope_view(perm: str = roles.VIEW) -> Callable[[Callable[..., HttpResponse]], Callable[..., HttpResponse]]:
    """A console view inside one scope: called as view(request, scope, keys, ...) after the checks."""

    def decorator(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
        @wraps(view)
        def wrapped(request: HttpRequest, scope_id: int, *args: Any, **kwargs: Any) -> HttpResponse:
            scope, keys = get_scope(request, scope_id, perm)
            return view(request, scope, keys, *args, **kwargs)

        return console_view(wrapped)

    return decorator


def wants_fragment(request: HttpRequest) -> bool:
    htmx = getattr(request, "htmx", None)
    return bool(htmx) and not htmx.history_restore_request


def render_screen(
    request: HttpRequest, page: str, fragment: str, context: dict[str, Any], status: int = 200
) -> HttpResponse:
    """The full page, or only its swappable fragment for an htmx request.

    A scope page asked for by the scope header's counter (`hx-target: scope-counts`, refreshed
    after row actions) answers with the counts alone.
    """
    template = page
    if wants_fragment(request):
        template = fragment
        if request.htmx.target == COUNTS_TARGET and "counts" in context:
            template = "console/_counts.html"
    return render(request, template, context, status=status)


COUNTS_TARGET = "scope-counts"


def user_permissions(user: Any) -> dict[str, bool]:
    """What the templates need to know to show or hide actions."""
    return {
        "can_operate": user.has_perm(roles.OPERATE),
        "can_delete": user.has_perm(roles.DELETE),
        "can_export": user.has_perm(roles.EXPORT),
        "can_import": user.has_perm(roles.IMPORT),
    }
