"""Bearer-token authentication and the scope check, shared by every token-authenticated face.

`bot_for_token(request)` is the one way a request's `Authorization: Bearer <token>` becomes a
`BotToken` (401 otherwise); `scope_for` derives the scope a request names and refuses (403) a bot
the token does not hold. The JSON API uses them through `BearerToken`; other faces may call them.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from memconsole.memory import tokens
from memconsole.memory.audit import Actor
from memconsole.memory.errors import ValidationError
from memconsole.memory.models import ISOLATION_SESSION, BotToken
from memconsole.memory.scopes import ScopeKeys, derive_scope

from .errors import ApiError

SCHEME = {"type": "http", "scheme": "bearer", "bearerFormat": "mct_..."}


def bot_for_token(request: HttpRequest) -> BotToken:
    """The live token the request carries; ApiError 401 (with WWW-Authenticate) without one."""
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


class BearerToken:
    """ninja auth: `request.auth` becomes the request's BotToken."""

    def __call__(self, request: HttpRequest) -> BotToken:
        return bot_for_token(request)


def actor_for(request: HttpRequest) -> Actor:
    token: BotToken = request.auth  # type: ignore[attr-defined]  # set by ninja from BearerToken
    return Actor.for_token(token)


def scope_for(request: HttpRequest, bot_uuid: Any, session_name: Any, isolation: Any = None) -> ScopeKeys:
    """The scope the request names (docs/design.md §2); 422 for a malformed one, 403 for another bot's."""
    if not isinstance(bot_uuid, str) or not bot_uuid.strip():
        raise ValidationError("bot_uuid is required", field="bot_uuid")
    keys = derive_scope(bot_uuid, session_name, isolation or ISOLATION_SESSION)
    actor_for(request).require_bot(keys)
    return keys
