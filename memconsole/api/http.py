"""The API's HTTP edge: token auth, rate limit, body limits, strict JSON parsing and JSON errors.

Every endpoint is wrapped by `api_view`, which answers every failure with
`{"error": {"code", "message", "field"?}}` and never with an HTML page:

    400 malformed JSON or wrong types   401 no, unknown or revoked token   403 bot not held by the token
    404 no such object in this scope    405 wrong method                   413 body over the limit
    422 valid JSON breaking a rule      429 rate limit (Retry-After)       503 vector index unavailable

Checks run in that order of cost: method, token, rate limit, body size, JSON, field types, scope,
then the domain operation, which validates its rules before it writes anything.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Callable
from datetime import UTC, datetime
from functools import wraps
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse, JsonResponse, UnreadablePostError
from django.views.decorators.csrf import csrf_exempt

from memconsole.lib.vectors import VectorIndexError
from memconsole.memory import tokens
from memconsole.memory.audit import Actor
from memconsole.memory.errors import NotFound, PermissionDenied, ValidationError
from memconsole.memory.models import ISOLATION_SESSION, BotToken
from memconsole.memory.scopes import ScopeKeys, derive_scope

from . import ratelimit

log = logging.getLogger("memconsole.api")

MAX_DEPTH = 16

# Field kinds a request may carry (the OpenAPI document says the same, in openapi.py).
STRING, INTEGER, STRINGS, DATETIME, OBJECT = "string", "integer", "strings", "datetime", "object"
SCOPE_FIELDS = {"bot_uuid": STRING, "session_name": STRING, "isolation": STRING}

_ISO_DATETIME = re.compile(
    r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?([Zz]|[+-]\d{2}:?\d{2}(:\d{2})?)?", re.ASCII
)


class ApiError(Exception):
    def __init__(
        self, status: int, code: str, message: str, field: str | None = None, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.field = status, code, message, field
        self.headers = headers or {}


def json_response(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> JsonResponse:
    response = JsonResponse(data, status=status, safe=False, json_dumps_params={"ensure_ascii": False})
    response["Cache-Control"] = "no-store"
    for name, value in (headers or {}).items():
        response[name] = value
    return response


def error_response(
    status: int, code: str, message: str, field: str | None = None, headers: dict[str, str] | None = None
) -> JsonResponse:
    error: dict[str, str] = {"code": code, "message": message}
    if field:
        error["field"] = field
    return json_response({"error": error}, status=status, headers=headers)


# --- the wrapper --------------------------------------------------------------------------------


def bearer_token(request: HttpRequest) -> BotToken:
    header = request.headers.get("Authorization", "")
    scheme, _, secret = header.strip().partition(" ")
    if not header or scheme.lower() != "bearer" or not secret.strip():
        raise ApiError(
            401, "unauthorized", "send 'Authorization: Bearer <token>'", headers={"WWW-Authenticate": "Bearer"}
        )
    token = tokens.authenticate(secret.strip())
    if token is None:
        raise ApiError(
            401,
            "unauthorized",
            "the token is unknown or revoked",
            headers={"WWW-Authenticate": 'Bearer error="invalid_token"'},
        )
    return token


def api_view(*methods: str, auth: bool = True) -> Callable:
    """Wrap a JSON endpoint: method check, bearer token, rate limit, and errors mapped to JSON.

    The view receives `request.api_actor` (Actor.for_token) and `request.api_token`.
    """

    def decorator(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
        @csrf_exempt
        @wraps(view)
        def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            try:
                if request.method not in methods:
                    raise ApiError(
                        405,
                        "method_not_allowed",
                        f"use {' or '.join(methods)}",
                        headers={"Allow": ", ".join(methods)},
                    )
                if auth:
                    token = bearer_token(request)
                    wait = ratelimit.hit(token)
                    if wait is not None:
                        raise ApiError(
                            429,
                            "rate_limited",
                            f"at most {settings.MEMCONSOLE_API_RATE_PER_MINUTE} requests a minute per token; "
                            f"retry in {wait} s",
                            headers={"Retry-After": str(wait)},
                        )
                    request.api_token = token
                    request.api_actor = Actor.for_token(token)
                return view(request, *args, **kwargs)
            except ApiError as exc:
                return error_response(exc.status, exc.code, exc.message, exc.field, exc.headers)
            except ValidationError as exc:
                return error_response(422, "invalid", exc.message, exc.field)
            except NotFound as exc:
                return error_response(404, "not_found", str(exc) or "not found")
            except PermissionDenied:
                return error_response(403, "forbidden", "this token may not use this bot's memory", "bot_uuid")
            except VectorIndexError:
                log.exception("vector index unavailable during %s %s", request.method, request.path)
                return error_response(503, "unavailable", "the vector index is unavailable; retry later")
            except DatabaseError:
                log.exception("database error during %s %s", request.method, request.path)
                return error_response(503, "unavailable", "the database is busy or unavailable; retry later")
            except Exception:  # never an HTML error page under /api/
                log.exception("unexpected error during %s %s", request.method, request.path)
                return error_response(500, "internal_error", "unexpected server error")

        return wrapper

    return decorator


# --- request bodies -----------------------------------------------------------------------------


def _reject_constant(name: str) -> Any:
    raise ApiError(400, "malformed_json", f"{name} is not valid JSON")


def _finite_float(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise ApiError(400, "malformed_json", f"the number {text[:40]} is out of range")
    return number


def _check_tree(data: Any) -> None:
    """Refuse deep nesting and strings that are not text (lone surrogates) or carry NUL."""
    stack: list[tuple[Any, int, str | None]] = [(data, 1, None)]
    while stack:
        value, depth, top = stack.pop()
        if depth > MAX_DEPTH:
            raise ApiError(400, "invalid_body", f"JSON nested deeper than {MAX_DEPTH} levels", top)
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise ApiError(400, "invalid_body", "a string holds an invalid unicode escape", top) from None
            if "\x00" in value:
                raise ApiError(422, "invalid", "a string contains a NUL character", top)
        elif isinstance(value, dict):
            for key, item in value.items():
                stack.append((key, depth + 1, top or key))
                stack.append((item, depth + 1, top or key))
        elif isinstance(value, list):
            stack.extend((item, depth + 1, top) for item in value)


def read_json(request: HttpRequest) -> dict[str, Any]:
    """The request body as a JSON object, after the size limit and strict parsing."""
    limit = settings.MEMCONSOLE_API_MAX_BODY_BYTES
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        raise ApiError(400, "bad_request", "Content-Length is not a number") from None
    if declared > limit:
        raise ApiError(413, "payload_too_large", f"the body is over {limit} bytes")
    try:
        body = request.body
    except RequestDataTooBig:  # Django's own cap (DATA_UPLOAD_MAX_MEMORY_SIZE) when it is the lower one
        raise ApiError(413, "payload_too_large", f"the body is over {limit} bytes") from None
    except UnreadablePostError:
        raise ApiError(400, "bad_request", "the body could not be read (connection closed?)") from None
    if len(body) > limit:
        raise ApiError(413, "payload_too_large", f"the body is over {limit} bytes")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise ApiError(400, "malformed_json", "the body is not UTF-8") from None
    if not text.strip():
        raise ApiError(400, "malformed_json", "the body is empty; send a JSON object")
    try:
        data = json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float)
    except ApiError:
        raise
    except RecursionError:
        raise ApiError(400, "invalid_body", f"JSON nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:  # JSONDecodeError, and ints over Python's digit limit
        raise ApiError(400, "malformed_json", f"malformed JSON: {exc}"[:300]) from None
    if not isinstance(data, dict):
        raise ApiError(400, "invalid_body", "the body must be a JSON object")
    _check_tree(data)
    return data


def read_query(request: HttpRequest) -> dict[str, Any]:
    """Query-string parameters (last value wins) under the same checks as a body."""
    data = {key: request.GET.get(key) for key in request.GET}
    _check_tree(data)
    return data


def parse_datetime(value: str, name: str) -> datetime:
    """An ISO-8601 date-time with a time zone ('Z' or an offset)."""
    if not _ISO_DATETIME.fullmatch(value):
        raise ApiError(400, "invalid_type", f"{name} must be an ISO-8601 date-time, e.g. 2025-01-31T09:30:00Z", name)
    try:
        parsed = datetime.fromisoformat(value.replace("z", "Z").replace("t", "T"))
    except ValueError as exc:
        raise ApiError(400, "invalid_type", f"{name} is not a valid date-time: {exc}", name) from None
    if parsed.tzinfo is None or parsed.utcoffset() is None:
        raise ApiError(422, "invalid", f"{name} must carry a time zone ('Z' or an offset such as +08:00)", name)
    try:
        return parsed.astimezone(UTC)
    except OverflowError:
        raise ApiError(422, "invalid", f"{name} is out of range", name) from None


def _typed(value: Any, kind: str, name: str) -> Any:
    if kind == STRING:
        if not isinstance(value, str):
            raise ApiError(400, "invalid_type", f"{name} must be a string", name)
        return value
    if kind == INTEGER:
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise ApiError(400, "invalid_type", f"{name} must be a whole number", name)
        return value
    if kind == STRINGS:
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise ApiError(400, "invalid_type", f"{name} must be a list of strings", name)
        return value
    if kind == DATETIME:
        if not isinstance(value, str):
            raise ApiError(400, "invalid_type", f"{name} must be an ISO-8601 date-time string", name)
        return parse_datetime(value, name)
    if kind == OBJECT:
        if not isinstance(value, dict):
            raise ApiError(400, "invalid_type", f"{name} must be an object", name)
        return value
    raise AssertionError(kind)


def take(data: dict[str, Any], spec: dict[str, str], prefix: str = "") -> dict[str, Any]:
    """Check `data` against `spec` ({name: kind}): unknown names and wrong types are 400.

    A null reads as absent, so that the operation's default applies.
    """
    unknown = sorted(set(data) - set(spec))
    if unknown:
        raise ApiError(
            400, "unknown_field", f"unknown field {prefix}{unknown[0]!r}"[:200], f"{prefix}{unknown[0]}"[:200]
        )
    return {name: _typed(value, spec[name], prefix + name) for name, value in data.items() if value is not None}


def scope_for(request: HttpRequest, fields: dict[str, Any]) -> ScopeKeys:
    """Derive the request's scope (DESIGN.md §2); 403 when the token does not hold its bot."""
    bot_uuid = fields.pop("bot_uuid", "")
    session_name = fields.pop("session_name", None)
    isolation = fields.pop("isolation", ISOLATION_SESSION)
    if not bot_uuid.strip():
        raise ApiError(422, "invalid", "bot_uuid is required", "bot_uuid")
    keys = derive_scope(bot_uuid, session_name, isolation)
    actor: Actor = request.api_actor
    if actor.bot_uuids is None or keys.bot_uuid not in actor.bot_uuids:
        raise PermissionDenied("this token may not use this bot's memory")
    return keys
