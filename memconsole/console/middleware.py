"""Security headers that Django 5.2 does not set itself, and the console's time zone."""

from __future__ import annotations

import zoneinfo
from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.utils import timezone

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
