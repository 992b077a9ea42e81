"""GET /metrics: Prometheus' text format, for a bearer token or an allowed address only.

MEMCONSOLE_METRICS_TOKEN (`Authorization: Bearer <token>`) and MEMCONSOLE_METRICS_ALLOW (client
networks, taken from the address the way the login rate limit takes it behind a proxy) each let a
scraper in; with neither set the URL does not exist (404, like any unknown path).
"""

from __future__ import annotations

import hmac
import ipaddress
from functools import cache

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from memconsole.console.middleware import client_ip
from memconsole.jobs.collectors import JobCollector
from memconsole.lib import metrics as series

from .collectors import MemoryCollector

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@cache
def _networks(allowed: tuple[str, ...]) -> tuple[Network, ...]:
    return tuple(ipaddress.ip_network(network, strict=False) for network in allowed)


def has_token(request: HttpRequest, token: str) -> bool:
    scheme, _, offered = request.headers.get("Authorization", "").partition(" ")
    return bool(token) and scheme.lower() == "bearer" and hmac.compare_digest(offered.strip().encode(), token.encode())


def from_allowed_address(request: HttpRequest, allowed: list[str]) -> bool:
    try:
        address = ipaddress.ip_address(client_ip(request) or "")
    except ValueError:
        return False
    return any(address in network for network in _networks(tuple(allowed)))


def metrics(request: HttpRequest) -> HttpResponse:
    if not settings.MEMCONSOLE_METRICS_TOKEN and not settings.MEMCONSOLE_METRICS_ALLOW:
        raise Http404
    return _exposition(request)


@require_GET
@never_cache
def _exposition(request: HttpRequest) -> HttpResponse:
    token, allowed = settings.MEMCONSOLE_METRICS_TOKEN, settings.MEMCONSOLE_METRICS_ALLOW
    if not (has_token(request, token) or from_allowed_address(request, allowed)):
        if token:
            response = HttpResponse("A bearer token is required.\n", status=401, content_type="text/plain")
            response.headers["WWW-Authenticate"] = 'Bearer realm="metrics"'
            return response
        return HttpResponse("This address may not read the metrics.\n", status=403, content_type="text/plain")
    return HttpResponse(series.exposition([MemoryCollector(), JobCollector()]), content_type=series.CONTENT_TYPE)
