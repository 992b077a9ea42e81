"""/mcp: the MCP endpoint (Streamable HTTP), for bots and assistants holding a bot token.

Authenticated like the JSON API: `Authorization: Bearer <token>`, the same tokens, the same per-token
rate limit (429 with Retry-After). A refused request answers a JSON-RPC error with the HTTP status;
everything else is the SDK's answer (memconsole.mcp.server). Only POST: the server is stateless and
keeps no SSE stream, so a GET answers 405 as the transport allows.
"""

from __future__ import annotations

import json
import logging
from urllib.parse import urlsplit

from asgiref.sync import async_to_sync
from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.http.request import split_domain_port, validate_host
from django.views.decorators.csrf import csrf_exempt

from memconsole.api import ratelimit
from memconsole.api.auth import bot_for_token
from memconsole.api.errors import ApiError
from memconsole.api.parser import request_body
from memconsole.memory.audit import Actor
from memconsole.memory.models import BotToken

from . import server

log = logging.getLogger("memconsole.mcp")

# JSON-RPC error codes for refusals before the MCP layer (the implementation-defined range).
UNAUTHORIZED, RATE_LIMITED, REFUSED, INTERNAL_ERROR = -32001, -32002, -32600, -32603
# Hop-by-hop or Django-computed headers that the SDK's answer must not set on the Django response.
_SKIPPED_HEADERS = {"content-length", "connection", "transfer-encoding"}


class Refused(Exception):
    """A request refused before the MCP layer: answered with a JSON-RPC error and this HTTP status."""

    def __init__(self, status: int, code: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.headers = status, code, message, headers or {}

    def response(self) -> HttpResponse:
        body = {"jsonrpc": "2.0", "id": None, "error": {"code": self.code, "message": self.message}}
        response = HttpResponse(json.dumps(body), status=self.status, content_type="application/json")
        response["Cache-Control"] = "no-store"
        for name, value in self.headers.items():
            response[name] = value
        return response


def admit(request: HttpRequest) -> tuple[BotToken, bytes]:
    """The request's token and body, after the JSON API's checks in its order: method, token, rate limit,
    then the body as the JSON API reads it (chunked or not, within its size limit)."""
    if request.method != "POST":
        raise Refused(405, REFUSED, "use POST (this server keeps no SSE stream)", {"Allow": "POST"})
    if not origin_allowed(request.headers.get("Origin")):
        raise Refused(
            403, REFUSED, "requests from this origin are refused (CSRF_TRUSTED_ORIGINS lists the allowed ones)"
        )
    try:
        token = bot_for_token(request)  # the JSON API's own check (memconsole/api/auth.py)
    except ApiError as exc:
        raise Refused(exc.status, UNAUTHORIZED, exc.message, exc.headers) from None
    wait = ratelimit.hit(token)
    if wait is not None:
        limit = settings.MEMCONSOLE_API_RATE_PER_MINUTE
        message = f"at most {limit} requests a minute per token; retry in {wait} s"
        raise Refused(429, RATE_LIMITED, message, {"Retry-After": str(wait)})
    try:
        body = request_body(request)  # the JSON API's reader: chunked bodies too (memconsole/api/parser.py)
    except ApiError as exc:
        raise Refused(exc.status, REFUSED, exc.message) from None
    if body.lstrip().startswith(b"["):  # a JSON-RPC batch, which this protocol version no longer has
        raise Refused(400, REFUSED, "send one JSON-RPC message per request (batches are not supported)")
    return token, body


def origin_allowed(origin: str | None) -> bool:
    """The MCP transport's rule against DNS rebinding: a request a browser sends from a page names
    its `Origin`; only this server's own hosts (ALLOWED_HOSTS) and CSRF_TRUSTED_ORIGINS may call.
    A client that is no browser sends none, and is not refused for it."""
    if not origin:
        return True
    if origin in settings.CSRF_TRUSTED_ORIGINS:
        return True
    parsed = urlsplit(origin)
    host = split_domain_port(parsed.netloc)[0]  # as Django reads a Host: "[::1]" keeps its brackets
    return parsed.scheme in ("http", "https") and bool(host) and validate_host(host, settings.ALLOWED_HOSTS)


def json_only(accept: str) -> str:
    """The Accept header without text/event-stream when JSON is acceptable: one JSON answer, never a
    stream holding this worker thread (the SDK would stream `subscriptions/listen`, which it then refuses)."""
    media_types = {part.split(";")[0].strip().lower() for part in accept.split(",")}
    # No Accept header at all means anything is acceptable (RFC 9110 §12.5.1), as for curl.
    acceptable = {"", "application/json", "application/*", "*/*"}
    return "application/json" if media_types & acceptable else accept


def _is_json(headers: list[tuple[str, str]]) -> bool:
    return any(
        name.lower() == "content-type"
        and value.split(";")[0].strip().lower() in {"application/json", "text/event-stream"}
        for name, value in headers
    )


@csrf_exempt  # a bot endpoint: authenticated by a bearer token, never by a cookie
def endpoint(request: HttpRequest) -> HttpResponse:
    try:
        token, body = admit(request)
    except Refused as refused:
        return refused.response()
    headers = [(name, value) for name, value in request.headers.items() if name.lower() != "accept"]
    headers.append(("Accept", json_only(request.headers.get("Accept", ""))))
    query_string = request.META.get("QUERY_STRING", "").encode("latin-1")
    try:
        answer = async_to_sync(server.serve)("POST", request.path, query_string, headers, body, Actor.for_token(token))
    except Exception:  # the SDK answers its own errors: this is a bug, and still no HTML page
        log.exception("the MCP server failed on POST %s", request.path)
        return Refused(500, INTERNAL_ERROR, "unexpected server error").response()
    if answer.status >= 400 and not _is_json(answer.headers):
        # The SDK's own refusals of the transport (a wrong Content-Type, ...) are plain text: the
        # same JSON-RPC error shape as every other refusal here, with its status and words.
        message = bytes(answer.body).decode("utf-8", "replace").strip()[:300] or "the request was refused"
        return Refused(answer.status, REFUSED, message).response()
    response = HttpResponse(bytes(answer.body), status=answer.status)
    for name, value in answer.headers:
        if name.lower() not in _SKIPPED_HEADERS:
            response[name] = value
    response["Cache-Control"] = "no-store"
    return response
