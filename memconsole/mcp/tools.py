"""The MCP tools: each one an argument schema, the JSON schema made from it, and a thin call into memory.

A tool takes what the matching JSON API endpoint takes, validated by the API's own request schema
(memconsole/api/schemas.py: the same types, limits and error codes), and is scoped and audited
exactly like it: the scope comes from `derive_scope(bot_uuid, session_name, isolation)`, the actor is
the bot token's (`Actor.for_token`), and a bot the token does not hold is refused. Every failure of a call is a tool
error (`isError: true`, with the API's `{"error": {"code", "message", "field"}}` as structured
content) that the model can read and correct, never an HTTP 5xx.

These functions are synchronous (the ORM); `memconsole.mcp.server` runs them on the request's thread.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

import mcp_types as types
from django.db import DatabaseError
from pydantic import BaseModel, ConfigDict, Field, Strict
from pydantic import ValidationError as ArgumentError

from memconsole.api.bots import (
    FactForgetRequest,
    FactQuery,
    FactRequest,
    MessageQuery,
    MessageRequest,
    forget_answer,
)
from memconsole.api.errors import refusal
from memconsole.api.schemas import (
    ForgetRequest,
    InjectRequest,
    InjectResponse,
    ProfileQuery,
    ProfileUpdateRequest,
    RecallRequest,
    RememberRequest,
    ScopedRequest,
)
from memconsole.api.site import unavailable_answer
from memconsole.memory import episodes, facts, injection, profiles, queries, retrieval, window
from memconsole.memory.audit import Actor
from memconsole.memory.errors import Conflict, NotFound, PermissionDenied, Unavailable, ValidationError
from memconsole.memory.models import PROFILE_SESSION
from memconsole.memory.scopes import ScopeKeys, derive_scope
from memconsole.memory.validation import MAX_LIST_LIMIT

log = logging.getLogger("memconsole.mcp")


# --- arguments: the JSON API's request schemas (memconsole/api/schemas.py), and list_sessions' own ---


class ListSessionsRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    bot_uuid: Annotated[str, Strict()] | None = Field(None, description="only this bot's spaces (one the token holds)")
    limit: Annotated[int, Strict(), Field(ge=1, le=MAX_LIST_LIMIT)] = Field(
        50, description="how many spaces at most, the most recently used first"
    )


def scope_for(actor: Actor, request: ScopedRequest) -> ScopeKeys:
    """The scope a call names, derived as the JSON API derives it (api/auth.py); PermissionDenied for a
    bot the token does not hold."""
    bot_uuid, session_name, isolation = request.scope()
    if not bot_uuid.strip():
        raise ValidationError("bot_uuid is required", field="bot_uuid")
    keys = derive_scope(bot_uuid, session_name, isolation)
    actor.require_bot(keys)
    return keys


# --- calls: each the JSON API endpoint's twin (api/endpoints.py) ---------------------------------


def _remember(actor: Actor, request: RememberRequest) -> dict[str, Any]:
    keys = scope_for(actor, request)
    result = episodes.remember(keys, actor, request.content, **request.operation_fields(exclude={"content"}))
    return {
        "episode_id": result.episode.episode_id,
        "status": result.episode.status,
        "superseded": result.superseded,
        "indexed": result.indexed,
        "importance": result.episode.importance,
        "adjusted": result.adjusted,
    }


def _recall(actor: Actor, request: RecallRequest) -> dict[str, Any]:
    keys = scope_for(actor, request)
    hits = retrieval.recall(keys, request.query, actor=actor, **request.operation_fields(exclude={"query"}))
    return {"episodes": [hit.as_dict() for hit in hits]}


def _forget(actor: Actor, request: ForgetRequest) -> dict[str, Any]:
    return forget_answer(scope_for(actor, request), actor, request.episode_id, request.all)


def _get_profile(actor: Actor, request: ProfileQuery) -> dict[str, Any]:
    keys = scope_for(actor, request)
    profile_type, sender_id = request.type or PROFILE_SESSION, request.sender_id or ""
    data, row = profiles.get_profile(keys, profile_type, sender_id)
    return profiles.profile_answer(profile_type, sender_id, data, row)


def _update_profile(actor: Actor, request: ProfileUpdateRequest) -> dict[str, Any]:
    keys = scope_for(actor, request)
    profile_type, sender_id = request.type or PROFILE_SESSION, request.sender_id or ""
    changes = request.changes.model_dump(exclude_none=True) if request.changes else {}
    lists = request.operation_fields(exclude={"type", "sender_id", "changes"})
    change = profiles.change_profile(keys, actor, profile_type, sender_id, **changes, **lists)
    # The JSON API's answer too, with what was evicted and adjusted.
    return profiles.profile_change_answer(profile_type, sender_id, change)


def _inject(actor: Actor, request: InjectRequest) -> dict[str, Any]:
    keys = scope_for(actor, request)
    made = injection.record_injection(keys, actor, request.query, **request.operation_fields(exclude={"query"}))
    answer = {"context": made.context, "system_blocks": made.system_blocks, "snapshot_id": made.snapshot.snapshot_id}
    return InjectResponse.model_validate(answer).model_dump(mode="json")  # the JSON API's shape, nulls and all


def _list_sessions(actor: Actor, request: ListSessionsRequest) -> dict[str, Any]:
    bots = sorted(actor.bot_uuids or ())
    if request.bot_uuid is not None:
        actor.require_bot(request.bot_uuid.strip())
        bots = [request.bot_uuid.strip()]
    rows = queries.bot_sessions(bots, request.limit)
    return {
        "bot_uuids": bots,
        "sessions": [
            {
                "bot_uuid": row.bot_uuid,
                "session_name": row.session_name,
                "isolation": row.isolation,
                "first_seen": row.first_seen.isoformat(),  # the API's form (memory/sessions.py), not the exports'
                "last_seen": row.last_seen.isoformat(),
            }
            for row in rows
        ],
    }


# Issue 20: keyed facts and the conversation window (the API's twins are in api/bots.py).


def _remember_fact(actor: Actor, request: FactRequest) -> dict[str, Any]:
    keys = scope_for(actor, request)
    return facts.remember_fact(keys, actor, request.subject, request.key, request.value).as_dict()


def _recall_facts(actor: Actor, request: FactQuery) -> dict[str, Any]:
    found = facts.recall_facts(scope_for(actor, request), request.subject, request.key)
    return {"facts": [fact.as_dict() for fact in found]}


def _forget_fact(actor: Actor, request: FactForgetRequest) -> dict[str, Any]:
    facts.forget_fact(scope_for(actor, request), actor, request.subject, request.key)
    return {"forgotten": True}


def _append_message(actor: Actor, request: MessageRequest) -> dict[str, Any]:
    fields = request.operation_fields(exclude={"role", "content"})
    return window.append_message(scope_for(actor, request), actor, request.role, request.content, **fields).as_dict()


def _recent_messages(actor: Actor, request: MessageQuery) -> dict[str, Any]:
    keys = scope_for(actor, request)
    found = window.recent_messages(keys, request.limit)
    return {"messages": [m.as_dict() for m in found], "window_size": window.window_size(keys.bot_uuid)}


# --- the catalogue ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    arguments: type[BaseModel]
    call: Callable[[Actor, Any], dict[str, Any]]
    annotations: types.ToolAnnotations

    def describe(self) -> types.Tool:
        schema = self.arguments.model_json_schema()
        schema.pop("title", None)
        return types.Tool(
            name=self.name, description=self.description, input_schema=schema, annotations=self.annotations
        )


READ = types.ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=False)
WRITE = types.ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)
DELETE = types.ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False)

TOOLS: dict[str, Tool] = {
    tool.name: tool
    for tool in [
        Tool(
            "remember",
            "Store one episode (a fact, an event, a preference) in a chat's long-term memory. A correction "
            "('not Paris, Berlin') supersedes the older episode it corrects.",
            RememberRequest,
            _remember,
            WRITE,
        ),
        Tool(
            "recall",
            "Search a chat's memory: the best matching episodes, each with its score and why it ranked there.",
            RecallRequest,
            _recall,
            READ,
        ),
        Tool(
            "forget",
            "Delete one episode of a chat's memory for good (episode_id), or with all=true every episode "
            "written in this session; answers how many were deleted.",
            ForgetRequest,
            _forget,
            DELETE,
        ),
        Tool(
            "get_profile",
            "A chat's profile, or one speaker's (type 'speaker' with sender_id): name, traits, preferences, notes.",
            ProfileQuery,
            _get_profile,
            READ,
        ),
        Tool(
            "update_profile",
            "Change a chat's or a speaker's profile: set {name, notes}, add or remove traits and preferences. "
            "Every previous version is kept.",
            ProfileUpdateRequest,
            _update_profile,
            WRITE,
        ),
        Tool(
            "inject",
            "The memory to put into a prompt for this message: the relevant episodes and profiles as ready-made "
            "system blocks. Each injection is recorded so that an operator can see what the model was told.",
            InjectRequest,
            _inject,
            WRITE,
        ),
        Tool(
            "list_sessions",
            "The memory spaces (bot, chat, isolation) of the bots this token holds, most recently used first.",
            ListSessionsRequest,
            _list_sessions,
            READ,
        ),
        Tool(
            "remember_fact",
            "Remember one fact as subject, key and value (e.g. a speaker's sender_id, 'city', 'Berlin'); a new "
            "value for the same subject and key replaces the old one, which is kept in its history.",
            FactRequest,
            _remember_fact,
            WRITE,
        ),
        Tool("recall_facts", "The current facts about a subject (or one key of it).", FactQuery, _recall_facts, READ),
        Tool("forget_fact", "Forget one fact (subject and key) for good.", FactForgetRequest, _forget_fact, DELETE),
        Tool(
            "append_message",
            "Add a message (role user, assistant, system or tool) to this chat's short-term conversation window; "
            "the oldest beyond the bot's window size drop out.",
            MessageRequest,
            _append_message,
            WRITE,
        ),
        Tool(
            "recent_messages",
            "The last messages of this chat's conversation window, oldest first.",
            MessageQuery,
            _recent_messages,
            READ,
        ),
    ]
}


def _result(data: dict[str, Any], is_error: bool = False) -> types.CallToolResult:
    text = json.dumps(data, ensure_ascii=False)
    return types.CallToolResult(content=[types.TextContent(text=text)], structured_content=data, is_error=is_error)


def tool_error(code: str, message: str, field: str | None = None) -> types.CallToolResult:
    """A failed call as the model sees it: the JSON API's error envelope, flagged isError."""
    error: dict[str, str] = {"code": code, "message": message}
    if field:
        error["field"] = field
    return _result({"error": error}, is_error=True)


def _argument_error(exc: ArgumentError) -> types.CallToolResult:
    """The JSON API's answer to the same arguments: "unknown_field", "invalid_type" or "invalid", with the field."""
    error = refusal(exc)
    return tool_error(error.code, error.message, error.field)


def call_tool(actor: Actor, name: str, arguments: dict[str, Any] | None) -> types.CallToolResult:
    """Run one tool call for `actor`; every failure becomes a tool error (isError), never an exception."""
    tool = TOOLS[name]
    try:
        args = tool.arguments.model_validate(arguments or {})
    except ArgumentError as exc:
        return _argument_error(exc)
    try:
        return _result(tool.call(actor, args))
    except ValidationError as exc:
        return tool_error("invalid", exc.message, exc.field)
    except PermissionDenied:
        return tool_error("forbidden", "this token may not use this bot's memory", "bot_uuid")
    except NotFound as exc:
        return tool_error("not_found", str(exc) or "not found")
    except Conflict as exc:  # the JSON API's 409 body: re-read the profile (current_version) and re-apply
        conflict = {"code": "conflict", "message": exc.message, "field": "if_version"}
        return _result({"error": {**conflict, "current_version": exc.current_version}}, is_error=True)
    except Unavailable as exc:
        log.error("%s unavailable during MCP tool %s: %s", exc.code, name, exc)
        return tool_error(*unavailable_answer(exc))
    except DatabaseError:
        log.exception("database error during MCP tool %s", name)
        return tool_error("unavailable", "the database is busy or unavailable; retry later")
    except Exception:  # the model gets a tool error, the operator the traceback
        log.exception("unexpected error during MCP tool %s", name)
        return tool_error("internal_error", "unexpected server error")
