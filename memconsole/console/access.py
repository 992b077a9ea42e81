"""Who may see and do what in the console: the one decorator every console view wears.

A scope outside the user's bot grants is answered with 404 (its existence is never confirmed);
a role that is too low for an action gets 403. The memory domain's errors are mapped here once:
NotFound -> 404, PermissionDenied -> 403, ValidationError -> 400 with its reason, Conflict -> 409
(changed since it was read), Unavailable (the vector index, the embedding model or a decryption key
failed) -> a 503 page that says which.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from functools import wraps
from typing import Any
from urllib.parse import urlencode, urlsplit

from django.conf import settings
from django.contrib.auth import REDIRECT_FIELD_NAME
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponseRedirect
from django.http.response import HttpResponseBase
from django.shortcuts import resolve_url
from django.utils.cache import patch_vary_headers
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.cache import never_cache
from django_htmx.http import HttpResponseClientRedirect

from memconsole.memory import errors, queries, roles
from memconsole.memory.audit import Actor
from memconsole.memory.install import InstallState
from memconsole.memory.models import Scope
from memconsole.memory.scopes import ScopeKeys, keys_of

from .screens import HtmxHttpRequest, bad_request, unavailable

log = logging.getLogger("memconsole.console")

View = Callable[..., HttpResponseBase]


class ConsoleRequest(HtmxHttpRequest):
    """A request inside a console view: logged in, with its `actor` (the user and their bot grants)."""

    actor: Actor


def require_perm(user: Any, perm: str) -> None:
    """403 unless the user's role carries `perm`."""
    if not user.has_perm(perm):
        raise PermissionDenied


def actor_for(request: HttpRequest) -> Actor:
    return Actor.for_user(request.user, roles.allowed_bots(request.user))


def get_scope(request: ConsoleRequest, scope_id: int) -> tuple[Scope, ScopeKeys]:
    """The scope and its keys; 404 when it is outside the user's grants (or does not exist)."""
    scope = queries.visible_scope(request.actor, scope_id)
    if scope is None:
        raise Http404("No such memory space.")
    return scope, keys_of(scope)


def scope_from_query(request: ConsoleRequest) -> Scope | None:
    """The visible scope named by `?scope=<id>`; None when absent, not a plain id, or not visible."""
    value = request.GET.get("scope", "")
    # Not isdigit()/int(): "²" is a digit that int() refuses, and thousands of digits are slow.
    if not re.fullmatch(r"[0-9]{1,18}", value):
        return None
    return queries.visible_scope(request.actor, int(value))


def console_view(perm: str = roles.VIEW, *, scoped: bool = False) -> Callable[[View], View]:
    """Login required, viewing rights then `perm` (403), never cached, varied on HX-Request (full
    page and fragment share a URL), and the memory errors mapped to their answers.

    With `scoped`, the URL's `scope_id` becomes the view's `scope, keys` arguments: 404 outside
    the user's grants, checked before `perm` so that a low role learns nothing of other scopes.
    """

    def decorator(view: View) -> View:
        @wraps(view)
        def wrapped(request: ConsoleRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
            request.actor = actor_for(request)
            try:
                response = _checked_call(view, perm, scoped, request, *args, **kwargs)
            except errors.NotFound as exc:
                raise Http404(str(exc)) from exc
            except errors.PermissionDenied as exc:
                raise PermissionDenied(str(exc)) from exc
            except errors.ValidationError as exc:
                response = bad_request(request, exc.in_language())
            except errors.Conflict as exc:  # changed since the form was rendered (a view may show more)
                response = bad_request(request, exc.message, status=409)
            except (errors.Unavailable, *errors.OUTSIDE_FAILURES) as exc:
                # Also a lib error that escaped the domain unwrapped (a sealed field read while
                # rendering): a 503 page that says what is wrong, never a traceback.
                log.warning("console request failed: %s is unavailable", type(exc).__name__, exc_info=exc)
                response = unavailable(request, errors.unavailable(exc))
            patch_vary_headers(response, ("HX-Request",))
            return response

        @wraps(view)
        def logged_in(request: ConsoleRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
            if not request.user.is_authenticated:
                return to_login(request)
            return wrapped(request, *args, **kwargs)

        return never_cache(logged_in)

    return decorator


def to_login(request: HttpRequest) -> HttpResponseBase:
    """The login page, coming back afterwards to the page the user was on. An htmx request (a
    session that expired while a page was open) is told to load the login page as a whole page
    (`HX-Redirect`): following the redirect itself, htmx would put the login form inside the page.
    A POST comes back to the page it was sent from, never to its own (POST-only) address."""
    if request.method == "GET" and not getattr(request, "htmx", False):
        back = request.get_full_path()
    else:
        back = _same_site_path(request, request.headers.get("HX-Current-URL") or request.headers.get("Referer"))
    login = f"{resolve_url(settings.LOGIN_URL)}?{urlencode({REDIRECT_FIELD_NAME: back})}"
    if getattr(request, "htmx", False):
        return HttpResponseClientRedirect(login)
    return HttpResponseRedirect(login)


def _same_site_path(request: HttpRequest, url: str | None) -> str:
    """The path and query of `url` when it is a page of this site, else the overview ("/")."""
    if not url or not url_has_allowed_host_and_scheme(url, {request.get_host()}, request.is_secure()):
        return "/"
    parts = urlsplit(url)
    return (parts.path or "/") + (f"?{parts.query}" if parts.query else "")


def scope_view(perm: str = roles.VIEW) -> Callable[[View], View]:
    """`console_view` for a screen inside one scope: called as view(request, scope, keys, ...)."""
    return console_view(perm, scoped=True)


def _checked_call(
    view: View, perm: str, scoped: bool, request: ConsoleRequest, *args: Any, **kwargs: Any
) -> HttpResponseBase:
    require_perm(request.user, roles.VIEW)
    # an encrypted install without its key shows nothing (503 page); cached: no query per page
    InstallState.require_key(cached=True)
    if scoped:
        scope, keys = get_scope(request, kwargs.pop("scope_id"))
        args = (scope, keys, *args)
    require_perm(request.user, perm)
    return view(request, *args, **kwargs)
