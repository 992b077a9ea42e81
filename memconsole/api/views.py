"""Bot-facing JSON endpoints under /api/v1/ (docs/api.md). Each is a thin call into memory.operations."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import defaults

from memconsole.memory import operations as ops
from memconsole.memory.models import PROFILE_SESSION, Profile

from . import openapi
from .http import (
    DATETIME,
    INTEGER,
    OBJECT,
    SCOPE_FIELDS,
    STRING,
    STRINGS,
    ApiError,
    api_view,
    error_response,
    json_response,
    read_json,
    read_query,
    scope_for,
    take,
)

REMEMBER_FIELDS = SCOPE_FIELDS | {
    "content": STRING,
    "tags": STRINGS,
    "importance": INTEGER,
    "sender_id": STRING,
    "sender_name": STRING,
    "timestamp": DATETIME,
}
RECALL_FIELDS = SCOPE_FIELDS | {
    "query": STRING,
    "top_k": INTEGER,
    "sender_id": STRING,
    "importance_min": INTEGER,
    "time_after": DATETIME,
    "time_before": DATETIME,
    "tags": STRINGS,
    "statuses": STRINGS,
}
PROFILE_QUERY_FIELDS = SCOPE_FIELDS | {"type": STRING, "sender_id": STRING}
PROFILE_UPDATE_FIELDS = PROFILE_QUERY_FIELDS | {
    "set": OBJECT,
    "add_traits": STRINGS,
    "remove_traits": STRINGS,
    "add_preferences": STRINGS,
    "remove_preferences": STRINGS,
}
PROFILE_SET_FIELDS = {"name": STRING, "notes": STRING}
FORGET_FIELDS = SCOPE_FIELDS | {"episode_id": STRING}
INJECT_FIELDS = SCOPE_FIELDS | {
    "query": STRING,
    "query_id": STRING,
    "sender_id": STRING,
    "sender_name": STRING,
    "top_k": INTEGER,
}


@api_view("POST")
def remember(request: HttpRequest) -> JsonResponse:
    fields = take(read_json(request), REMEMBER_FIELDS)
    keys = scope_for(request, fields)
    result = ops.remember(keys, request.api_actor, fields.pop("content", None), **fields)
    episode = result.episode
    return json_response(
        {
            "episode_id": episode.episode_id,
            "status": episode.status,
            "superseded": result.superseded,
            "indexed": result.indexed,
        },
        status=201,
    )


@api_view("POST")
def recall(request: HttpRequest) -> JsonResponse:
    fields = take(read_json(request), RECALL_FIELDS)
    keys = scope_for(request, fields)
    hits = ops.recall(keys, fields.pop("query", None), actor=request.api_actor, **fields)
    return json_response({"episodes": [hit.as_dict() for hit in hits]})


def _profile_json(profile_type: str, sender_id: str, data: dict[str, Any], row: Profile | None) -> dict[str, Any]:
    return {
        "type": profile_type,
        "sender_id": "" if profile_type == PROFILE_SESSION else sender_id.strip(),
        "name": data.get("name", ""),
        "traits": data.get("traits", []),
        "preferences": data.get("preferences", []),
        "notes": data.get("notes", ""),
        "version": row.version if row else 0,
        "updated_at": row.updated_at.isoformat() if row else None,
    }


@api_view("GET", "POST")
def profile(request: HttpRequest) -> JsonResponse:
    if request.method == "GET":
        fields = take(read_query(request), PROFILE_QUERY_FIELDS)
        keys = scope_for(request, fields)
        profile_type, sender_id = fields.get("type", PROFILE_SESSION), fields.get("sender_id", "")
        data, row = ops.get_profile(keys, profile_type, sender_id)
        return json_response(_profile_json(profile_type, sender_id, data, row))
    fields = take(read_json(request), PROFILE_UPDATE_FIELDS)
    changes = take(fields.pop("set", {}), PROFILE_SET_FIELDS, prefix="set.")
    keys = scope_for(request, fields)
    profile_type, sender_id = fields.pop("type", PROFILE_SESSION), fields.pop("sender_id", "")
    row = ops.update_profile(keys, request.api_actor, profile_type, sender_id, **changes, **fields)
    return json_response(_profile_json(profile_type, sender_id, row.payload, row))


@api_view("POST")
def forget(request: HttpRequest) -> JsonResponse:
    fields = take(read_json(request), FORGET_FIELDS)
    keys = scope_for(request, fields)
    if "episode_id" not in fields:
        raise ApiError(422, "invalid", "episode_id is required", "episode_id")
    episode = ops.get_episode(keys, fields["episode_id"])  # NotFound (404) outside this scope
    ops.delete(keys, request.api_actor, [episode.episode_id])
    return json_response({"deleted": True})


@api_view("POST")
def inject(request: HttpRequest) -> JsonResponse:
    fields = take(read_json(request), INJECT_FIELDS)
    keys = scope_for(request, fields)
    injection = ops.record_injection(keys, request.api_actor, fields.pop("query", None), **fields)
    return json_response(
        {
            "context": injection.context,
            "system_blocks": injection.system_blocks,
            "snapshot_id": injection.snapshot.snapshot_id,
        }
    )


@api_view("GET", auth=False)
def openapi_document(request: HttpRequest) -> JsonResponse:
    return json_response(openapi.document())


@api_view("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS", auth=False)
def not_found(request: HttpRequest, *args: Any, **kwargs: Any) -> JsonResponse:
    """Every other path under /api/: a JSON 404, never Django's HTML page."""
    return error_response(404, "not_found", f"no API endpoint at {request.path[:200]}")


def _is_api(request: HttpRequest) -> bool:
    return request.path_info == "/api" or request.path_info.startswith("/api/")


def bad_request(request: HttpRequest, exception: Exception | None = None, **kwargs: Any) -> HttpResponse:
    """handler400: errors raised before any view (a disallowed Host, too many fields) stay JSON under /api/."""
    if _is_api(request):
        return error_response(400, "bad_request", "bad request")
    return defaults.bad_request(request, exception, **kwargs)


def server_error(request: HttpRequest, **kwargs: Any) -> HttpResponse:
    """handler500: api_view already answers its own errors; this covers failures outside the views."""
    if _is_api(request):
        return error_response(500, "internal_error", "unexpected server error")
    return defaults.server_error(request, **kwargs)
