"""The OpenAPI 3.1 description of /api/v1/, served at /api/v1/openapi.json.

tests/api/test_openapi.py validates real responses against it and the fuzz test checks every
response it provokes, so this document stays true to the views.
"""

from __future__ import annotations

from copy import deepcopy
from typing import Any

from django.conf import settings

from memconsole.memory import operations as ops
from memconsole.memory.models import STATUSES

VERSION = "1.0.0"


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


STRING = {"type": "string"}
STRINGS = {"type": "array", "items": {"type": "string"}}
DATETIME = {"type": "string", "format": "date-time", "description": "ISO-8601 with a time zone ('Z' or an offset)"}
EPISODE_ID = {"type": "string", "pattern": "^[0-9a-f]{12}$"}

SCOPE_PROPERTIES: dict[str, Any] = {
    "bot_uuid": {"type": "string", "minLength": 1, "maxLength": 128, "description": "must be a bot the token holds"},
    "session_name": {
        "type": "string",
        "minLength": 1,
        "maxLength": 255,
        "description": "{launcher_type}_{launcher_id}, e.g. group_123 or person_42",
    },
    "isolation": {"type": "string", "enum": ["session", "bot"], "default": "session"},
}
SCOPE_REQUIRED = ["bot_uuid", "session_name"]


def _request(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {**SCOPE_PROPERTIES, **properties},
        "required": SCOPE_REQUIRED + required,
        "additionalProperties": False,
    }


def _schemas() -> dict[str, Any]:
    profile_data = {
        "type": "object",
        "properties": {
            "name": STRING,
            "traits": {**STRINGS, "maxItems": ops.MAX_TRAITS},
            "preferences": {**STRINGS, "maxItems": ops.MAX_PREFERENCES},
            "notes": {"type": "string", "maxLength": ops.MAX_NOTES},
        },
        "required": ["name", "traits", "preferences", "notes"],
    }
    return {
        "Error": {
            "type": "object",
            "properties": {
                "error": {
                    "type": "object",
                    "properties": {
                        "code": {
                            "type": "string",
                            "description": "malformed_json, invalid_body, invalid_type, unknown_field, bad_request "
                            "(400); unauthorized (401); forbidden (403); not_found (404); method_not_allowed (405); "
                            "payload_too_large (413); invalid (422); rate_limited (429); unavailable (503)",
                        },
                        "message": STRING,
                        "field": {"type": "string", "description": "the offending input, where there is one"},
                    },
                    "required": ["code", "message"],
                    "additionalProperties": False,
                }
            },
            "required": ["error"],
            "additionalProperties": False,
        },
        "Breakdown": {
            "type": "object",
            "description": "score = product of these, clamped to [0, 1] (DESIGN.md §4)",
            "properties": {
                name: {"type": "number", "minimum": 0}
                for name in ("similarity", "recency", "importance", "speaker", "update", "exact")
            }
            | {"similarity": {"type": "number"}},
            "required": ["similarity", "recency", "importance", "speaker", "update", "exact"],
        },
        "Episode": {
            "type": "object",
            "properties": {
                "episode_id": EPISODE_ID,
                "content": STRING,
                "score": {"type": "number", "minimum": 0, "maximum": 1},
                "breakdown": _ref("Breakdown"),
                "tags": STRINGS,
                "importance": {"type": "integer", "minimum": 1, "maximum": 5},
                "timestamp": {"anyOf": [DATETIME, {"type": "null"}]},
                "sender_id": STRING,
                "sender_name": STRING,
                "status": {"type": "string", "enum": list(STATUSES)},
            },
            "required": [
                "episode_id",
                "content",
                "score",
                "breakdown",
                "tags",
                "importance",
                "timestamp",
                "sender_id",
                "sender_name",
                "status",
            ],
        },
        "ProfileData": profile_data,
        "Profile": {
            "type": "object",
            "properties": {
                "type": {"type": "string", "enum": ["session", "speaker"]},
                "sender_id": {"type": "string", "description": "'' for the session profile"},
                **profile_data["properties"],
                "version": {"type": "integer", "minimum": 0, "description": "0 until the first change"},
                "updated_at": {"anyOf": [DATETIME, {"type": "null"}]},
            },
            "required": ["type", "sender_id", "name", "traits", "preferences", "notes", "version", "updated_at"],
        },
        "RememberRequest": _request(
            {
                "content": {"type": "string", "minLength": 1, "maxLength": settings.MEMCONSOLE_MAX_CONTENT_CHARS},
                "tags": {
                    **STRINGS,
                    "maxItems": ops.MAX_TAGS,
                    "description": "correction, fact-update or clarification supersede similar active episodes",
                },
                "importance": {"type": "integer", "minimum": 1, "maximum": 5, "default": 2},
                "sender_id": {"type": "string", "maxLength": ops.MAX_SENDER_CHARS},
                "sender_name": {"type": "string", "maxLength": ops.MAX_SENDER_CHARS},
                "timestamp": {**DATETIME, "description": "event time; now when absent"},
            },
            ["content"],
        ),
        "RememberResponse": {
            "type": "object",
            "properties": {
                "episode_id": EPISODE_ID,
                "status": {"type": "string", "enum": list(STATUSES)},
                "superseded": {"type": "array", "items": EPISODE_ID},
                "indexed": {
                    "type": "boolean",
                    "description": "false: stored, but not searchable until the index takes it (`manage.py reindex`)",
                },
            },
            "required": ["episode_id", "status", "superseded", "indexed"],
        },
        "RecallRequest": _request(
            {
                "query": {"type": "string", "minLength": 1, "maxLength": ops.MAX_QUERY_CHARS},
                "top_k": {"type": "integer", "minimum": 1, "maximum": ops.TOP_K_MAX, "default": 5},
                "sender_id": STRING,
                "importance_min": {"type": "integer", "minimum": 1, "maximum": 5},
                "time_after": DATETIME,
                "time_before": DATETIME,
                "tags": {**STRINGS, "description": "keep episodes carrying any of these tags"},
                "statuses": {
                    "type": "array",
                    "items": {"type": "string", "enum": list(STATUSES)},
                    "default": ["active"],
                },
            },
            ["query"],
        ),
        "RecallResponse": {
            "type": "object",
            "properties": {"episodes": {"type": "array", "items": _ref("Episode")}},
            "required": ["episodes"],
        },
        "ProfileUpdateRequest": _request(
            {
                "type": {"type": "string", "enum": ["session", "speaker"], "default": "session"},
                "sender_id": {"type": "string", "description": "required for a speaker profile"},
                "set": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string", "maxLength": ops.MAX_PROFILE_NAME},
                        "notes": {"type": "string", "maxLength": ops.MAX_NOTES},
                    },
                    "additionalProperties": False,
                },
                "add_traits": STRINGS,
                "remove_traits": STRINGS,
                "add_preferences": STRINGS,
                "remove_preferences": STRINGS,
            },
            [],
        ),
        "ForgetRequest": _request({"episode_id": EPISODE_ID}, ["episode_id"]),
        "ForgetResponse": {
            "type": "object",
            "properties": {"deleted": {"const": True}},
            "required": ["deleted"],
        },
        "InjectRequest": _request(
            {
                "query": {"type": "string", "minLength": 1, "maxLength": ops.MAX_QUERY_CHARS},
                "query_id": {"type": "string", "maxLength": 255},
                "sender_id": STRING,
                "sender_name": STRING,
                "top_k": {"type": "integer", "minimum": 1, "maximum": ops.TOP_K_MAX, "default": 3},
            },
            ["query"],
        ),
        "InjectResponse": {
            "type": "object",
            "properties": {
                "context": {
                    "type": "object",
                    "description": "LangBot's _ltm_context shape",
                    "properties": {
                        "speaker": {
                            "type": "object",
                            "properties": {"id": STRING, "name": STRING},
                            "required": ["id", "name"],
                        },
                        "session_profile": _ref("ProfileData"),
                        "speaker_profile": _ref("ProfileData"),
                        "episodes": {"type": "array", "items": _ref("Episode")},
                    },
                    "required": ["speaker", "session_profile", "speaker_profile", "episodes"],
                },
                "system_blocks": STRINGS,
                "snapshot_id": {"type": "string", "pattern": "^[0-9a-f]{32}$"},
            },
            "required": ["context", "system_blocks", "snapshot_id"],
        },
    }


def _error(description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": _ref("Error")}}}


def _responses() -> dict[str, Any]:
    limit = settings.MEMCONSOLE_API_MAX_BODY_BYTES
    rate = settings.MEMCONSOLE_API_RATE_PER_MINUTE
    return {
        "BadRequest": _error("malformed JSON, a body that is not an object, a wrong type or an unknown field"),
        "Unauthorized": _error("no token, or an unknown or revoked one"),
        "Forbidden": _error("the token does not hold this bot_uuid"),
        "NotFound": _error("no such object in this scope"),
        "MethodNotAllowed": _error("wrong HTTP method (see the Allow header)"),
        "PayloadTooLarge": _error(f"the body is over {limit} bytes (MEMCONSOLE_API_MAX_BODY_BYTES)"),
        "Unprocessable": _error("valid JSON breaking a rule (importance 9, empty content, a 21st trait...)"),
        "RateLimited": {
            **_error(f"over {rate} requests a minute for this token (MEMCONSOLE_API_RATE_PER_MINUTE)"),
            "headers": {"Retry-After": {"description": "seconds until the next minute", "schema": {"type": "integer"}}},
        },
        "Unavailable": _error("the vector index or the database is unavailable; retry later"),
    }


def _errors(*extra: str) -> dict[str, Any]:
    codes = {
        "400": "BadRequest",
        "401": "Unauthorized",
        "403": "Forbidden",
        "405": "MethodNotAllowed",
        "413": "PayloadTooLarge",
        "422": "Unprocessable",
        "429": "RateLimited",
        "503": "Unavailable",
    }
    if "404" in extra:
        codes["404"] = "NotFound"
    return {status: {"$ref": f"#/components/responses/{name}"} for status, name in sorted(codes.items())}


def _ok(schema: str, description: str, status: str = "200") -> dict[str, Any]:
    return {status: {"description": description, "content": {"application/json": {"schema": _ref(schema)}}}}


def _post(summary: str, request: str, response: str, description: str, status: str = "200", *extra: str) -> dict:
    return {
        "summary": summary,
        "security": [{"bearerAuth": []}],
        "requestBody": {"required": True, "content": {"application/json": {"schema": _ref(request)}}},
        "responses": _ok(response, description, status) | _errors(*extra),
    }


def _query_parameters() -> list[dict[str, Any]]:
    params = [
        {"name": name, "in": "query", "required": name in SCOPE_REQUIRED, "schema": schema}
        for name, schema in SCOPE_PROPERTIES.items()
    ]
    params.append(
        {
            "name": "type",
            "in": "query",
            "schema": {"type": "string", "enum": ["session", "speaker"], "default": "session"},
        }
    )
    params.append(
        {"name": "sender_id", "in": "query", "schema": STRING, "description": "required for a speaker profile"}
    )
    return params


def document() -> dict[str, Any]:
    """The OpenAPI 3.1 document (limits filled in from the running settings)."""
    profile_get = {
        "summary": "Read a session or speaker profile (empty fields when there is none yet)",
        "security": [{"bearerAuth": []}],
        "parameters": _query_parameters(),
        "responses": _ok("Profile", "the profile") | _errors(),
    }
    return deepcopy(
        {
            "openapi": "3.1.0",
            "jsonSchemaDialect": "https://json-schema.org/draft/2020-12/schema",
            "info": {
                "title": "memconsole bot API",
                "version": VERSION,
                "description": "Bots write and read their long-term memory. Every request names its scope with "
                "bot_uuid, session_name and isolation; the server derives the keys (LangBot rules). See docs/api.md.",
            },
            "servers": [{"url": "/api/v1"}],
            "paths": {
                "/remember": {
                    "post": _post("Store one episode", "RememberRequest", "RememberResponse", "stored", "201")
                },
                "/recall": {
                    "post": _post("Semantic search within the scope", "RecallRequest", "RecallResponse", "ranked hits")
                },
                "/profile": {
                    "get": profile_get,
                    "post": _post(
                        "Change a profile (each change keeps the previous version)",
                        "ProfileUpdateRequest",
                        "Profile",
                        "the profile after the change",
                    ),
                },
                "/forget": {
                    "post": _post(
                        "Delete one episode of this scope", "ForgetRequest", "ForgetResponse", "deleted", "200", "404"
                    )
                },
                "/inject": {
                    "post": _post(
                        "Build the memory for a prompt and record it as an injection snapshot",
                        "InjectRequest",
                        "InjectResponse",
                        "the injection",
                    )
                },
                "/openapi.json": {
                    "get": {
                        "summary": "This document",
                        "security": [],
                        "responses": {"200": {"description": "OpenAPI 3.1", "content": {"application/json": {}}}},
                    }
                },
            },
            "components": {
                "securitySchemes": {"bearerAuth": {"type": "http", "scheme": "bearer", "bearerFormat": "mct_..."}},
                "schemas": _schemas(),
                "responses": _responses(),
            },
        }
    )
