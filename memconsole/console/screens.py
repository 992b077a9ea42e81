"""How a console screen answers: the full page, or for htmx the fragment that the page includes,
with the context every screen shares."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.http import url_has_allowed_host_and_scheme
from django_htmx.middleware import HtmxDetails

from memconsole.memory import queries, roles
from memconsole.memory.errors import Unavailable
from memconsole.memory.models import Scope
from memconsole.memory.scopes import ScopeKeys

# The scope header's counter (refreshed after row actions) asks for the counts alone.
COUNTS_TARGET = "scope-counts"


class HtmxHttpRequest(HttpRequest):
    """A request that went through django-htmx's middleware (typed as django-htmx documents)."""

    htmx: HtmxDetails


def wants_fragment(request: HtmxHttpRequest) -> bool:
    """An htmx request swaps a fragment in; a history restore needs the whole page."""
    return bool(request.htmx) and not request.htmx.history_restore_request


def render_screen(
    request: HtmxHttpRequest, page: str, fragment: str, context: dict[str, Any], status: int = 200
) -> HttpResponse:
    """The full page, or only its swappable fragment for an htmx request (the counts alone when
    the scope header's counter asks)."""
    template = page
    if wants_fragment(request):
        template = fragment
        if request.htmx.target == COUNTS_TARGET and "counts" in context:
            template = "console/_counts.html"
    return render(request, template, context, status=status)


def user_permissions(user: Any) -> dict[str, bool]:
    """What the templates need to know to show or hide actions."""
    return {
        "can_operate": user.has_perm(roles.OPERATE),
        "can_delete": user.has_perm(roles.DELETE),
        "can_export": user.has_perm(roles.EXPORT),
        "can_import": user.has_perm(roles.IMPORT),
    }


def scope_context(request: HttpRequest, scope: Scope, keys: ScopeKeys, tab: str, **extra: Any) -> dict[str, Any]:
    """The context of a screen inside one scope: the scope, its counts, the open tab, the user's rights."""
    return {
        "scope": scope,
        "keys": keys,
        "tab": tab,
        "counts": queries.scope_counts(keys),
        **user_permissions(request.user),
        **extra,
    }


def next_url(request: HttpRequest, default: str) -> str:
    """The `next` field of a posted form when it is a path of this site, else `default`. Only a path
    (a relative "abc" would be taken by `redirect` for a view name, and fail after the change)."""
    candidate = request.POST.get("next") or request.GET.get("next") or ""
    if candidate.startswith("/") and url_has_allowed_host_and_scheme(
        candidate, {request.get_host()}, request.is_secure()
    ):
        return candidate
    return default


def bad_request(request: HtmxHttpRequest, message: str, status: int = 400) -> HttpResponse:
    """The 400 page (or fragment) with the reason."""
    return render_screen(request, "console/bad_request.html", "console/_bad_request.html", {"message": message}, status)


def unavailable(request: HtmxHttpRequest, error: Unavailable) -> HttpResponse:
    """The 503 page (or fragment) saying which outside system failed and where to look."""
    context = {"code": error.code}
    return render_screen(request, "console/unavailable.html", "console/_unavailable.html", context, 503)
