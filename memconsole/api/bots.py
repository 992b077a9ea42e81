"""Bot-memory endpoints of issue 20 (docs/api.md): a bot's sessions with their counts, keyed facts
and the conversation window. `POST /forget` with `"all": true` (endpoints.py, through
`forget_answer`) forgets a whole session.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

from django.http import HttpRequest
from ninja import Router
from ninja.responses import Status
from pydantic import AfterValidator, BaseModel, BeforeValidator, Field
from pydantic_core import PydanticCustomError

from memconsole.memory import episodes, facts, sessions, validation, window
from memconsole.memory.audit import Actor
from memconsole.memory.botmemory_models import MAX_FACT_KEY_CHARS, MAX_SUBJECT_CHARS
from memconsole.memory.errors import ValidationError
from memconsole.memory.scopes import ScopeKeys

from .auth import actor_for, scope_for
from .fields import DateTime, IsolationName, Text, Trimmed
from .parser import JsonBody, StrictQuery
from .schemas import Request, ScopedRequest, Timestamp

router = Router()


def _content_limit(schema: dict[str, Any]) -> None:
    schema["maxLength"] = validation.max_content_chars()  # a setting: read for each document


def _within_limit(value: str) -> str:
    limit = validation.max_content_chars()
    if len(value) > limit:
        raise PydanticCustomError("string_too_long", "is longer than {limit} characters", {"limit": limit})
    return value


def _text(value: Any) -> Any:
    if not isinstance(value, str):
        raise PydanticCustomError("invalid_type", "must be a string")
    return value


def forget_answer(keys: ScopeKeys, actor: Actor, episode_id: str | None, whole_session: bool | None) -> dict[str, Any]:
    """`forget` (the API's and the MCP tool's): one episode, or with `"all": true` every episode
    written in the session (`sessions.forget_session`, one audited batch); the answer counts them."""
    if whole_session and episode_id is None:
        return {"deleted": True, "count": sessions.forget_session(keys, actor)}
    if episode_id is None or whole_session:
        raise ValidationError('give either episode_id or "all": true', field="episode_id")
    episode = episodes.get_episode(keys, episode_id)  # NotFound (404) outside this scope
    episodes.delete(keys, actor, [episode.episode_id])
    return {"deleted": True, "count": 1}


class SessionsQuery(Request):
    bot_uuid: Annotated[Text, Field(min_length=1, max_length=128, description="must be a bot the token holds")]
    limit: Annotated[int, Field(ge=1, le=sessions.MAX_SESSIONS)] | None = Field(
        None, description=f"at most this many, most recently used first (default and maximum {sessions.MAX_SESSIONS})"
    )


class SessionItem(BaseModel):
    session_name: str
    isolation: IsolationName
    episodes: int = Field(ge=0, description="episodes written in this session (every status)")
    last_seen: Timestamp


class SessionList(BaseModel):
    sessions: list[SessionItem]


@router.get(
    "sessions",
    response=SessionList,
    summary="List a bot's sessions (the spaces its token may use) with their episode counts",
    url_name="sessions",
)
def list_sessions(request: HttpRequest, params: Annotated[SessionsQuery, StrictQuery(...)]) -> dict[str, Any]:
    found = sessions.list_sessions(actor_for(request), params.bot_uuid, limit=params.limit or sessions.MAX_SESSIONS)
    return {"sessions": [summary.as_dict() for summary in found]}


# --- keyed facts (memory/facts.py) ---------------------------------------------------------------

Subject = Annotated[
    Text,
    Field(
        min_length=1,
        max_length=MAX_SUBJECT_CHARS,
        description="who or what the fact is about; a speaker's sender_id puts it on their profile",
    ),
    Trimmed,
]
FactKey = Annotated[Text, Field(min_length=1, max_length=MAX_FACT_KEY_CHARS), Trimmed]


class FactRequest(ScopedRequest):
    subject: Subject
    key: FactKey
    value: Annotated[Text, Field(min_length=1, max_length=facts.MAX_VALUE_CHARS), Trimmed]


class FactQuery(ScopedRequest):
    subject: Subject
    key: FactKey | None = Field(None, description="only this key (all of the subject's facts when absent)")


class FactForgetRequest(ScopedRequest):
    subject: Subject
    key: FactKey


class FactItem(BaseModel):
    subject: str
    key: str
    value: str
    version: int = Field(ge=1, description="1 for a new fact; each new value adds one")
    updated_at: Timestamp


class FactList(BaseModel):
    facts: list[FactItem]


class FactForgotten(BaseModel):
    forgotten: Literal[True]


@router.post("facts", response=FactItem, summary="Remember a fact (one per subject and key; upsert)", url_name="facts")
def remember_fact(request: HttpRequest, payload: Annotated[FactRequest, JsonBody(...)]) -> dict[str, Any]:
    keys = scope_for(request, *payload.scope())
    return facts.remember_fact(keys, actor_for(request), payload.subject, payload.key, payload.value).as_dict()


@router.get("facts", response=FactList, summary="Read a subject's current facts", url_name="facts_read")
def recall_facts(request: HttpRequest, params: Annotated[FactQuery, StrictQuery(...)]) -> dict[str, Any]:
    keys = scope_for(request, *params.scope())
    return {"facts": [fact.as_dict() for fact in facts.recall_facts(keys, params.subject, params.key)]}


@router.post("facts/forget", response=FactForgotten, summary="Forget one fact", url_name="facts_forget")
def forget_fact(request: HttpRequest, payload: Annotated[FactForgetRequest, JsonBody(...)]) -> dict[str, Any]:
    keys = scope_for(request, *payload.scope())
    facts.forget_fact(keys, actor_for(request), payload.subject, payload.key)  # NotFound (404)
    return {"forgotten": True}


# --- the conversation window (memory/window.py) --------------------------------------------------

Role = Literal["user", "assistant", "system", "tool"]
assert get_args(Role) == window.ROLES


class MessageRequest(ScopedRequest):
    role: Annotated[Role, BeforeValidator(_text)]
    content: Annotated[Text, Field(min_length=1, json_schema_extra=_content_limit), AfterValidator(_within_limit)]
    sender_id: Annotated[Text, Field(max_length=255)] | None = None
    sender_name: Annotated[Text, Field(max_length=255)] | None = None
    created_at: DateTime | None = Field(None, description="the message's time; now when absent")


class MessageQuery(ScopedRequest):
    limit: Annotated[int, Field(ge=1, le=window.MAX_WINDOW_SIZE)] | None = Field(
        None, description="the last N messages (the whole window, the bot's window size, by default)"
    )


class MessageItem(BaseModel):
    role: Role
    content: str
    created_at: Timestamp
    sender_id: str
    sender_name: str


class MessageList(BaseModel):
    messages: list[MessageItem] = Field(description="oldest first, as a prompt's history reads")
    window_size: int = Field(ge=1, description="how many messages this bot's chats keep (default 20)")


@router.post(
    "messages", response={201: MessageItem}, summary="Append a message to this chat's window", url_name="messages"
)
def append_message(request: HttpRequest, payload: Annotated[MessageRequest, JsonBody(...)]) -> Status[dict[str, Any]]:
    keys = scope_for(request, *payload.scope())
    message = window.append_message(
        keys, actor_for(request), payload.role, payload.content, **payload.operation_fields(exclude={"role", "content"})
    )
    return Status(201, message.as_dict())


@router.get("messages", response=MessageList, summary="Read this chat's last messages", url_name="messages_read")
def recent_messages(request: HttpRequest, params: Annotated[MessageQuery, StrictQuery(...)]) -> dict[str, Any]:
    keys = scope_for(request, *params.scope())
    messages = window.recent_messages(keys, params.limit)
    return {"messages": [m.as_dict() for m in messages], "window_size": window.window_size(keys.bot_uuid)}
