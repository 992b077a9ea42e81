"""The bot API as one django-ninja `NinjaAPI`: auth, rate limit, parser, error mapping, OpenAPI document.

Checks run in order of cost: method (urls.py), token (auth.py), rate limit (ratelimit.py), body size
and JSON (parser.py), field types and rules (schemas.py), scope, then the domain operation, which
validates its own rules before it writes anything. Every failure is answered here, once, as
`{"error": {...}}` (errors.py); nothing under /api/ answers an HTML page.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from django.conf import settings
from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from ninja import NinjaAPI
from ninja.errors import Throttled
from ninja.errors import ValidationError as NinjaValidationError
from ninja.openapi.docs import Swagger
from ninja.openapi.schema import REF_TEMPLATE, OpenAPISchema
from ninja.operation import Operation
from ninja.renderers import JSONRenderer
from ninja.responses import NinjaJSONEncoder
from ninja.schema import NinjaGenerateJsonSchema

from memconsole.memory import modelswitch
from memconsole.memory.errors import (
    Conflict,
    EncryptionKeyMissing,
    NotFound,
    PermissionDenied,
    Unavailable,
    ValidationError,
)
from memconsole.memory.install import InstallState
from memconsole.memory.models import BotToken

from . import bots, endpoints, listing
from .auth import SCHEME, BearerToken
from .errors import ApiError, api_error_response, conflict_response, error_response
from .parser import StrictJSONParser
from .ratelimit import TokenThrottle
from .schemas import ConflictError, Error

log = logging.getLogger("memconsole.api")

VERSION = "1.0.0"
SECURITY = "bearerAuth"
# Every bot operation may answer these; `forget` also 404 (no such episode in this scope).
ERROR_RESPONSES = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    405: "MethodNotAllowed",
    413: "PayloadTooLarge",
    422: "Unprocessable",
    429: "RateLimited",
    503: "Unavailable",
}
NOT_FOUND_ON = {"forget", "forget_fact"}  # forget_fact: api/bots.py (issue 20)
CONFLICT_ON = {"update_profile"}  # 409 when `if_version` is not the stored version
UNAVAILABLE = {
    "vector_index": "the vector index is unavailable; retry later",
    "embedding_model": "the embedding model is unavailable; retry later",
    "decryption": "stored data cannot be decrypted with the configured keys",
    "row_integrity": "a stored row was changed outside memconsole and is not served; the health check names it",
}


class KeyedBearerToken(BearerToken):
    """The token (401 first), then the install's key: an encrypted install without it serves
    nothing, read or write (503 `encryption_key_missing`), so nothing is stored in plaintext."""

    def __call__(self, request: HttpRequest) -> BotToken:
        token = super().__call__(request)
        InstallState.require_key()
        return token


class JsonRenderer(JSONRenderer):
    json_dumps_params = {"ensure_ascii": False}


class LocalSwagger(Swagger):
    """Swagger UI from ninja's own static files (no CDN), so it works under the console's CSP."""

    def get_openapi_url(self, api: NinjaAPI, path_params: dict[str, Any]) -> str:
        return reverse("api:openapi")


class Document(OpenAPISchema):
    """ninja's document, with the error answers of every operation and one bearer scheme."""

    def operation_details(self, operation: Operation) -> dict[str, Any]:
        details = super().operation_details(operation)
        errors = dict(ERROR_RESPONSES)
        if operation.view_func.__name__ in NOT_FOUND_ON:
            errors[404] = "NotFound"
        if operation.view_func.__name__ in CONFLICT_ON:
            errors[409] = "Conflict"
        for status, name in sorted(errors.items()):
            details["responses"][status] = {"$ref": f"#/components/responses/{name}"}
        return details

    def operation_security(self, operation: Operation) -> list[dict[str, Any]] | None:
        if not operation.auth_callbacks:
            return None
        self.securitySchemes[SECURITY] = SCHEME
        return [{SECURITY: []}]


def _error(description: str, model: str = "Error") -> dict[str, Any]:
    return {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": REF_TEMPLATE.format(model=model)}}},
    }


def _responses() -> dict[str, Any]:
    limit = settings.MEMCONSOLE_API_MAX_BODY_BYTES
    rate = settings.MEMCONSOLE_API_RATE_PER_MINUTE
    return {
        "BadRequest": _error("malformed JSON, a body that is not an object, a wrong type or an unknown field"),
        "Unauthorized": _error("no token, or an unknown or revoked one"),
        "Forbidden": _error("the token does not hold this bot_uuid"),
        "NotFound": _error("no such object in this scope"),
        "MethodNotAllowed": _error("wrong HTTP method (see the Allow header)"),
        "Conflict": _error(
            "the profile changed since `if_version` was read: nothing was changed; read it again (its version "
            "is `current_version`) and re-apply",
            "ConflictError",
        ),
        "PayloadTooLarge": _error(f"the body is over {limit} bytes (MEMCONSOLE_API_MAX_BODY_BYTES)"),
        "Unprocessable": _error("valid JSON breaking a rule (empty content, top_k 0, an unknown status...)"),
        "RateLimited": {
            **_error(f"over {rate} requests a minute for this token (MEMCONSOLE_API_RATE_PER_MINUTE)"),
            "headers": {"Retry-After": {"description": "seconds until the next minute", "schema": {"type": "integer"}}},
        },
        "Unavailable": _error("the vector index, the embedding model or the database is unavailable; retry later"),
    }


class BotApi(NinjaAPI):
    def get_content_type(self) -> str:
        return "application/json"

    def get_openapi_schema(self, *, path_prefix: str | None = None, path_params: Any = None) -> Any:
        document = Document(self, "")  # paths relative to the server URL, /api/v1
        definitions: dict[str, Any] = {}
        for model in (Error, ConflictError):
            schema = model.model_json_schema(ref_template=REF_TEMPLATE, schema_generator=NinjaGenerateJsonSchema)
            definitions.update({**schema.pop("$defs", {}), model.__name__: schema})
        document.add_schema_definitions(definitions)
        document["components"]["responses"] = _responses()
        document["paths"]["/openapi.json"] = {
            "get": {
                "operationId": "openapi",
                "summary": "This document",
                "security": [],
                "responses": {"200": {"description": "OpenAPI 3.1", "content": {"application/json": {}}}},
            }
        }
        return document


api = BotApi(
    title="memconsole bot API",
    version=VERSION,
    description="Bots write and read their long-term memory. Every request names its scope with bot_uuid, "
    "session_name and isolation; the server derives the keys (LangBot rules). See docs/api.md.",
    servers=[{"url": "/api/v1"}],
    urls_namespace="api",
    openapi_url=None,  # served by views.openapi_document and views.docs (GET only, JSON 405)
    docs=LocalSwagger(),
    auth=KeyedBearerToken(),
    throttle=TokenThrottle(),
    renderer=JsonRenderer(),
    parser=StrictJSONParser(),
    openapi_extra={"jsonSchemaDialect": "https://json-schema.org/draft/2020-12/schema"},
)
api.add_router("", endpoints.router)
api.add_router("", listing.router)
api.add_router("", bots.router)


def document() -> dict[str, Any]:
    """The OpenAPI 3.1 document as clients read it (generated from the schemas, limits from the settings)."""
    generated: dict[str, Any] = json.loads(json.dumps(api.get_openapi_schema(), cls=NinjaJSONEncoder))
    return generated


# --- the one error mapping ------------------------------------------------------------------------


@api.exception_handler(ApiError)
def _api_error(request: HttpRequest, exc: ApiError) -> HttpResponse:
    return api_error_response(exc)


@api.exception_handler(ValidationError)
def _invalid(request: HttpRequest, exc: ValidationError) -> HttpResponse:
    return error_response(422, "invalid", exc.message, exc.field)


@api.exception_handler(Conflict)
def _conflict(request: HttpRequest, exc: Conflict) -> HttpResponse:
    return conflict_response(exc.message, exc.current_version)


@api.exception_handler(NotFound)
def _not_found(request: HttpRequest, exc: NotFound) -> HttpResponse:
    return error_response(404, "not_found", str(exc) or "not found")


@api.exception_handler(PermissionDenied)
def _forbidden(request: HttpRequest, exc: PermissionDenied) -> HttpResponse:
    return error_response(403, "forbidden", "this token may not use this bot's memory", "bot_uuid")


@api.exception_handler(Throttled)
def _rate_limited(request: HttpRequest, exc: Throttled) -> HttpResponse:
    wait = max(1, int(exc.wait or 60))
    message = f"at most {settings.MEMCONSOLE_API_RATE_PER_MINUTE} requests a minute per token; retry in {wait} s"
    return error_response(429, "rate_limited", message, headers={"Retry-After": str(wait)})


@api.exception_handler(NinjaValidationError)
def _unparsed(request: HttpRequest, exc: NinjaValidationError) -> HttpResponse:
    # JsonBody and StrictQuery answer their own errors; this covers a parameter ninja checks itself.
    return error_response(400, "bad_request", "the request does not match this endpoint")


@api.exception_handler(Unavailable)
def _unavailable(request: HttpRequest, exc: Unavailable) -> HttpResponse:
    log.error("%s unavailable during %s %s: %s", exc.code, request.method, request.path, exc)
    return error_response(503, *unavailable_answer(exc))


def unavailable_answer(exc: Unavailable) -> tuple[str, str]:
    """(code, message) of a 503, the API's and the MCP tools' alike: `encryption_key_missing` and
    `row_integrity` by their names (waiting does not mend them), every other cause `unavailable`."""
    if isinstance(exc, EncryptionKeyMissing):
        return exc.code, exc.message
    if exc.code == "row_integrity":
        return exc.code, UNAVAILABLE[exc.code]
    message = UNAVAILABLE.get(exc.code, "a service is unavailable; retry later")
    return "unavailable", message + modelswitch.error_note()  # which model answers


@api.exception_handler(DatabaseError)
def _database(request: HttpRequest, exc: DatabaseError) -> HttpResponse:
    log.error("database error during %s %s", request.method, request.path, exc_info=exc)
    return error_response(503, "unavailable", "the database is busy or unavailable; retry later")


@api.exception_handler(Exception)
def _unexpected(request: HttpRequest, exc: Exception) -> HttpResponse:  # never an HTML error page under /api/
    log.error("unexpected error during %s %s", request.method, request.path, exc_info=exc)
    return error_response(500, "internal_error", "unexpected server error")
