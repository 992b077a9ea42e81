"""One middleware, outermost, for every request: its id, its latency, its metrics and its span.

The request id comes from the caller's X-Request-ID when that is short and safe (a proxy or a
bot may set one), else it is made here; it is in the response's X-Request-ID, on every log line
written while the request runs (logs.RequestIdFilter) and in the access log line that ends it:
method, path (never the query string, which can carry search text), route, status and duration.
Routes are URL pattern names ("api:recall"), so the metric labels stay few whatever the paths.
A streamed response (exports) is timed to when its view returned, not to its last byte.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from contextlib import ExitStack
from typing import Any

from django.conf import settings
from django.db import connections
from django.http import HttpRequest, HttpResponseBase
from opentelemetry.trace import SpanKind

from memconsole.lib import metrics, tracing

from .logs import META_KEY, accepted_request_id, request_id

HEADER = "X-Request-ID"
METHODS = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}
MAX_TRACED_SQL = 2000

access_log = logging.getLogger("memconsole.access")

Handler = Callable[[HttpRequest], HttpResponseBase]


def route_of(request: HttpRequest, static_prefix: str) -> str:
    """The URL pattern's name ("console:overview"; the view's dotted path when it has none)."""
    match = getattr(request, "resolver_match", None)
    if match is not None:
        return str(match.view_name)
    return "static" if request.path.startswith(static_prefix) else "unmatched"


def observe_requests(get_response: Handler) -> Handler:
    static_prefix = "/" + settings.STATIC_URL.lstrip("/")
    log_access = settings.MEMCONSOLE_ACCESS_LOG

    def middleware(request: HttpRequest) -> HttpResponseBase:
        started = time.perf_counter()
        current = accepted_request_id(request.headers.get(HEADER))
        request.META[META_KEY] = current  # the request's own X-Request-ID is now the id in use
        token = request_id.set(current)
        try:
            response = _traced(get_response, request, static_prefix) if tracing.enabled() else get_response(request)
            seconds = time.perf_counter() - started
            method = request.method if request.method in METHODS else "other"
            route = route_of(request, static_prefix)
            metrics.observe_request(route, method, response.status_code, seconds)
            response.headers[HEADER] = current
            if log_access:
                access_log.info(
                    "%s %s %s %.1f ms",
                    method,
                    printable(request.path),
                    response.status_code,
                    seconds * 1000,
                    extra={
                        "method": method,
                        "path": request.path,
                        "route": route,
                        "status": response.status_code,
                        "duration_ms": round(seconds * 1000, 1),
                    },
                )
            return response
        finally:
            request_id.reset(token)

    return middleware


def printable(text: str) -> str:
    """`text` for a log line: a line break or another control character in a URL (`%0a`) written
    escaped (`\\x0a`), so a request cannot forge a log line of its own."""
    return "".join(char if char.isprintable() else char.encode("unicode_escape").decode("ascii") for char in text)


def _traced(get_response: Handler, request: HttpRequest, static_prefix: str) -> HttpResponseBase:
    attributes = {"http.request.method": request.method or "", "url.path": request.path, "url.scheme": request.scheme}
    with tracing.server_span(f"HTTP {request.method}", request.headers, attributes) as span, ExitStack() as queries:
        for connection in connections.all():
            queries.enter_context(connection.execute_wrapper(_query_span(connection.vendor)))
        response = get_response(request)
        if span is not None:
            route = route_of(request, static_prefix)
            span.update_name(f"{request.method} {route}")
            span.set_attribute("http.route", route)
            span.set_attribute("http.response.status_code", response.status_code)
            span.set_attribute("memconsole.request_id", request_id.get())
            if response.status_code >= 500:
                tracing.mark_error(span, f"HTTP {response.status_code}")
        return response


def _query_span(vendor: str) -> Callable[..., Any]:
    """A database span per query: the SQL with its placeholders (never the values)."""

    def wrapper(execute: Callable[..., Any], sql: str, params: Any, many: bool, context: dict[str, Any]) -> Any:
        operation = (sql.lstrip().split(None, 1) or ["SQL"])[0].upper()
        attributes = {"db.system.name": vendor, "db.operation.name": operation, "db.query.text": sql[:MAX_TRACED_SQL]}
        with tracing.span(operation, attributes, SpanKind.CLIENT):
            return execute(sql, params, many, context)

    return wrapper
