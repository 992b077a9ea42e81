"""Security headers that Django 5.2 does not set itself, the console's time zone, and its page for an
address that only takes a form."""

from __future__ import annotations

import zoneinfo
from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import Resolver404, resolve
from django.utils import timezone

from memconsole.memory import errors

from .screens import unavailable
from .timezones import chosen_zone

# Everything the console loads comes from this origin: no inline scripts or styles, no CDN.
CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "connect-src 'self'",
        "frame-ancestors 'none'",
        "base-uri 'self'",
        "form-action 'self'",
        "object-src 'none'",
    ]
)


def security_headers(get_response: Callable[[HttpRequest], HttpResponse]) -> Callable[[HttpRequest], HttpResponse]:
    def middleware(request: HttpRequest) -> HttpResponse:
        response = get_response(request)
        response.headers.setdefault("Content-Security-Policy", CONTENT_SECURITY_POLICY)
        return response

    return middleware


def time_zone(get_response: Callable[[HttpRequest], HttpResponse]) -> Callable[[HttpRequest], HttpResponse]:
    """Shows and reads every console time in one zone (`timezones.chosen_zone`). After the session
    middleware; `request.time_zone_source` says where the zone came from (templates and console.js)."""

    def middleware(request: HttpRequest) -> HttpResponse:
        zone, source = chosen_zone(request)
        request.time_zone_source = source  # type: ignore[attr-defined]
        if zone:
            timezone.activate(zoneinfo.ZoneInfo(zone))
        else:
            timezone.deactivate()
        try:
            return get_response(request)
        finally:
            timezone.deactivate()

    return middleware


def form_only_addresses(
    get_response: Callable[[HttpRequest], HttpResponse],
) -> Callable[[HttpRequest], HttpResponse]:
    """A browser opening a console address that only takes a form (reloading the page a failed form
    left, a bookmark, the back button) gets a page that says so with a link to the nearest screen,
    not Django's empty 405. The API and MCP answer their own 405s (JSON) and are left alone."""

    def middleware(request: HttpRequest) -> HttpResponse:
        response = get_response(request)
        if response.status_code != 405 or response.content or request.path.startswith(("/api", "/mcp")):
            return response
        form_only = request.method in ("GET", "HEAD") and "POST" in response.get("Allow", "")
        if not form_only or "text/html" not in request.headers.get("Accept", ""):
            return response  # (a POST to a page is refused as Django answers it)
        page = render(request, "405.html", {"back": _nearest_screen(request.path)}, status=405)
        page["Allow"] = response.get("Allow", "POST")
        return page

    return middleware


class AdminUnavailable:
    """The Django admin's answer when the memory cannot be read or written (an encrypted install
    without a key that opens it, a database that refuses): the console's 503 page, never a 500.
    The admin's own views roll their transaction back first, so nothing is half saved."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if request.path.startswith("/admin/") and isinstance(exception, errors.Unavailable):
            return unavailable(request, exception)  # type: ignore[arg-type]
        return None


def _nearest_screen(path: str) -> str:
    """The closest address above `path` that is a page ("/tokens/3/revoke/" → "/tokens/")."""
    parts = path.strip("/").split("/")[:-1]
    while parts:
        candidate = "/" + "/".join(parts) + "/"
        try:
            resolve(candidate)
        except Resolver404:
            parts.pop()
            continue
        return candidate
    return "/"


def client_ip(request: HttpRequest) -> str | None:
    """The client's address for login rate limits (django-axes).

    Behind a reverse proxy (MEMCONSOLE_BEHIND_PROXY) every connection comes from the proxy, so the
    address is read from X-Forwarded-For: the entry MEMCONSOLE_PROXY_COUNT places from the right,
    which the nearest trusted proxies appended (entries further left are the client's to forge).
    """
    remote: str | None = request.META.get("REMOTE_ADDR")
    forwarded: str = request.META.get("HTTP_X_FORWARDED_FOR", "")
    if not settings.MEMCONSOLE_BEHIND_PROXY or not forwarded:
        return remote
    hops = [hop.strip() for hop in forwarded.split(",") if hop.strip()]
    if len(hops) < settings.MEMCONSOLE_PROXY_COUNT:
        return remote
    return hops[-settings.MEMCONSOLE_PROXY_COUNT]
