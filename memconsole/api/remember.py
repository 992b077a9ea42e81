"""`POST /api/v1/remember`: one episode, or a batch of episodes of one scope, all or nothing.

A body with `episodes` is a batch (`RememberBatchRequest`): the scope once, then a list of
episodes, each with the fields of a single remember (`RememberItem`). It holds at most
`batch_limit()` episodes (MEMCONSOLE_REMEMBER_BATCH_MAX, and never more than the token's rate limit
allows in a minute), counts as one request per episode against that limit, and is stored by
`batch_remember.remember_many`: one bad episode refuses the whole batch (422 naming it,
`episodes[3].content`) and nothing is written. Any other body is one episode, as it always was.
"""

from __future__ import annotations

from typing import Annotated, Any

from django.conf import settings
from django.http import HttpRequest
from pydantic import BaseModel, BeforeValidator, ConfigDict, Discriminator, Field, Tag
from pydantic_core import PydanticCustomError

from memconsole.memory import batch_remember
from memconsole.memory.episodes import RememberResult

from . import ratelimit
from .auth import actor_for, scope_for
from .errors import ApiError
from .schemas import RememberItem, RememberRequest, RememberResponse, ScopedRequest

BATCH_ID_PATTERN = "^[0-9a-f]{32}$"


def batch_limit() -> int:
    """The most episodes one request may hold: the setting, and no more than a minute's rate limit."""
    return min(batch_remember.max_batch(), settings.MEMCONSOLE_API_RATE_PER_MINUTE)


def _within_batch_limit(value: Any) -> Any:
    # Before the items are checked: an oversized batch is refused as such, whatever it holds.
    limit = batch_limit()
    if isinstance(value, list) and len(value) > limit:
        setting = (
            "MEMCONSOLE_REMEMBER_BATCH_MAX" if limit == batch_remember.max_batch() else "MEMCONSOLE_API_RATE_PER_MINUTE"
        )
        raise PydanticCustomError(
            "too_long",
            "a batch holds at most {limit} episodes ({setting}), not {count}",
            {"limit": limit, "setting": setting, "count": len(value)},
        )
    return value


def _batch_schema(schema: dict[str, Any]) -> None:
    schema.update(maxItems=batch_limit())  # a setting: read for each document


EXAMPLE: dict[str, Any] = {
    "bot_uuid": "5f0c-bot",
    "session_name": "group_123456",
    "episodes": [
        {"content": "Alice lives in Paris", "sender_id": "u1", "sender_name": "Alice", "tags": ["home"]},
        {"content": "Bob prefers tea to coffee", "sender_id": "u2", "sender_name": "Bob", "importance": 3},
        {
            "content": "Alice lives in Berlin, not Paris",
            "sender_id": "u1",
            "sender_name": "Alice",
            "tags": ["correction"],
        },
    ],
}


class RememberBatchRequest(ScopedRequest):
    """Several episodes of one scope, stored all or nothing, in order (a correction supersedes an
    earlier episode of the batch too)"""

    model_config = ConfigDict(json_schema_extra={"examples": [EXAMPLE]})

    episodes: Annotated[
        list[RememberItem],
        Field(min_length=1, json_schema_extra=_batch_schema),
        BeforeValidator(_within_batch_limit),
    ] = Field(
        description="at most MEMCONSOLE_REMEMBER_BATCH_MAX episodes (256), each counting as one request against "
        "the rate limit; one invalid episode refuses the batch (422 naming it, e.g. `episodes[3].content`)"
    )


class RememberBatchResponse(BaseModel):
    episodes: list[RememberResponse] = Field(
        description="one answer per episode, in the order sent; `status` as stored after the whole batch "
        "(superseded for one that a later correction in the batch superseded)"
    )
    batch_id: Annotated[str, Field(pattern=BATCH_ID_PATTERN)] = Field(
        description="the batch id every episode's audit entry carries"
    )
    indexed: bool = Field(description="false: stored, but not searchable until the index takes them (reindex)")


def _body_kind(body: Any) -> str:
    return "batch" if isinstance(body, dict) and "episodes" in body else "one"


# `POST /remember`'s body: a batch when it has `episodes`, else one episode (parser.JsonBodyEither).
RememberBody = Annotated[
    Annotated[RememberRequest, Tag("one")] | Annotated[RememberBatchRequest, Tag("batch")],
    Discriminator(_body_kind),
]


def remember_answer(result: RememberResult) -> dict[str, Any]:
    episode = result.episode
    return {
        "episode_id": episode.episode_id,
        "status": episode.status,
        "superseded": result.superseded,
        "indexed": result.indexed,
        "importance": episode.importance,
        "adjusted": result.adjusted,
    }


def remember_batch(request: HttpRequest, payload: RememberBatchRequest) -> dict[str, Any]:
    """Store a batch: the scope checked, the rest of its episodes counted against the rate limit."""
    keys = scope_for(request, *payload.scope())
    items = [item.model_dump(exclude_none=True) for item in payload.episodes]
    wait = ratelimit.charge(request.auth, len(items) - 1)  # type: ignore[attr-defined]  # ninja's auth
    if wait is not None:
        message = (
            f"a batch of {len(items)} episodes counts as {len(items)} requests, and this token has fewer than that "
            f"left of its {settings.MEMCONSOLE_API_RATE_PER_MINUTE} a minute; retry in {wait} s"
        )
        raise ApiError(429, "rate_limited", message, headers={"Retry-After": str(wait)})
    result = batch_remember.remember_many(keys, actor_for(request), items)
    return {
        "episodes": [remember_answer(one) for one in result.results],
        "batch_id": result.batch_id,
        "indexed": result.indexed,
    }
