"""The API's one error shape, `{"error": {"code", "message", "field"?}}`, and how input errors earn it.

    400 malformed JSON or wrong types   401 no, unknown or revoked token   403 bot not held by the token
    404 no such object in this scope    405 wrong method                   409 `if_version` is stale
    413 body over the limit             422 valid JSON breaking a rule     429 rate limit (Retry-After)
    503 an outside system is down

A request schema (schemas.py) refuses wrong types and unknown fields with 400 and values that break
a limit with 422; `refusal` turns pydantic's errors into the one `ApiError` the request earns.
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import pydantic
from django.http import JsonResponse

# Pydantic error types that mean "the right type, but a value breaking a rule" (422). Every other
# type (string_type, int_type, list_type, model_type, invalid_type ...) is a wrong type (400).
RULE_BREAKS = frozenset(
    {
        "missing",
        "invalid",
        "string_too_short",
        "string_too_long",
        "string_pattern_mismatch",
        "too_short",
        "too_long",
        "greater_than",
        "greater_than_equal",
        "less_than",
        "less_than_equal",
        "literal_error",
    }
)
# A rule on a change names the value it changes, as the domain does ("a profile holds at most 20 traits").
RULE_FIELDS = {
    "add_traits": "traits",
    "remove_traits": "traits",
    "add_preferences": "preferences",
    "remove_preferences": "preferences",
}


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


def conflict_response(message: str, current_version: int) -> JsonResponse:
    """409 `{"error": {"code": "conflict", ..., "current_version": N}}`: nothing was changed."""
    error = {"code": "conflict", "message": message, "field": "if_version", "current_version": current_version}
    return json_response({"error": error}, status=409)


def api_error_response(exc: ApiError) -> JsonResponse:
    return error_response(exc.status, exc.code, exc.message, exc.field, exc.headers)


def _in_item(loc: tuple[int | str, ...]) -> bool:
    """Whether the location is inside one object of a list (`episodes[3].content`)."""
    return any(isinstance(part, int) and isinstance(after, str) for part, after in pairwise(loc))


def _path(loc: tuple[int | str, ...]) -> str:
    """The field's name: `set.nmae`; inside a list of objects with the item's index, `episodes[3].content`
    (an index at the end, a value of a list of strings such as `tags`, names the list)."""
    parts: list[str] = []
    for position, part in enumerate(loc):
        if isinstance(part, str):
            parts.append(f".{part}" if parts else part)
        elif position + 1 < len(loc) and isinstance(loc[position + 1], str):
            parts.append(f"[{part}]")
    return "".join(parts)


def _leaf(loc: tuple[int | str, ...]) -> str:
    if _in_item(loc):
        return _path(loc)
    names = [part for part in loc if isinstance(part, str)]
    return RULE_FIELDS.get(names[0], names[-1]) if names else ""


def refusal(exc: pydantic.ValidationError, depth: int = 0) -> ApiError:
    """The error a request earns for these schema errors: an unknown field first, then a wrong type
    (both 400, naming the full path such as `set.nmae`), then a broken rule (422, naming the value).

    `depth` leading parts of each location are dropped (ninja's wrapper around the schema).
    """
    errors = [(error["type"], tuple(error["loc"][depth:]), error["msg"]) for error in exc.errors()]
    for kind, loc, _ in errors:
        if kind == "extra_forbidden":
            path = _path(loc)
            return ApiError(400, "unknown_field", f"unknown field {path!r}"[:200], path[:200])
    for kind, loc, message in errors:
        if kind not in RULE_BREAKS:
            path = _path(loc)
            return ApiError(400, "invalid_type", _naming(path, message)[:300], path)
    kind, loc, message = errors[0]
    field = _leaf(loc)
    message = f"{field} is required" if kind == "missing" else _naming(field, message)[:300]
    return ApiError(422, "invalid", message, field)


def _naming(field: str, message: str) -> str:
    """The message about `field`, worded as the domain's are: "timestamp is out of range" (a
    message that reads on from the name), else "tags: a list is expected"."""
    return f"{field} {message}" if message.startswith("is ") else f"{field}: {message}"
