"""A bot's sessions as its bots see them (issue 20): list them with counts, forget one whole.

A session is a space of the bot (`Scope`: a session name under an isolation). "Written in that
session" means the episodes whose `scope_key` is the session's, within the space's `user_key`: under
session isolation that is the whole space; under bot isolation, the session's share of the bot's one
space (other chats' episodes stay).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Count

from . import audit, episodes
from .audit import Actor
from .episode_extras import prefetch_metadata
from .errors import ValidationError
from .models import ISOLATION_SESSION, Episode, EpisodeCounts, Scope
from .paging import KeysetPage, chunks, keyset_page, parse_cursor
from .scopes import HEALTH_PROBE_BOT_UUID, MAX_BOT_UUID, ScopeKeys
from .validation import text

MAX_SESSIONS = 1000
FORGET_BATCH = 500


@dataclass(frozen=True)
class SessionSummary:
    session_name: str
    isolation: str
    episodes: int  # written in this session, every status
    last_seen: datetime

    def as_dict(self) -> dict[str, Any]:
        return {
            "session_name": self.session_name,
            "isolation": self.isolation,
            "episodes": self.episodes,
            "last_seen": self.last_seen.isoformat(),
        }


def list_sessions(actor: Actor, bot_uuid: Any, *, limit: int = MAX_SESSIONS) -> list[SessionSummary]:
    """The bot's sessions (the spaces seen for it), most recently used first, each with the number of
    episodes written in it. `PermissionDenied` unless the actor may use the bot."""
    bot_uuid = text(bot_uuid, "bot_uuid", MAX_BOT_UUID, required=True, trim=True)
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_SESSIONS:
        raise ValidationError(f"limit must be a whole number from 1 to {MAX_SESSIONS}", field="limit")
    actor.require_bot(bot_uuid)
    if bot_uuid == HEALTH_PROBE_BOT_UUID:
        return []
    scopes = list(Scope.objects.filter(bot_uuid=bot_uuid).order_by("-last_seen", "-id")[:limit])
    own = {s.user_key for s in scopes if s.isolation == ISOLATION_SESSION}
    totals = {
        row.user_key: row.total for row in EpisodeCounts.objects.filter(user_key__in=own)
    }  # a session space's episodes are all its own: its counters answer without COUNT(*)
    shared = {s.user_key for s in scopes if s.isolation != ISOLATION_SESSION}
    per_session: dict[tuple[str, str], int] = {
        (row["user_key"], row["scope_key"]): row["n"]
        for row in Episode.objects.filter(user_key__in=shared)
        .values("user_key", "scope_key")
        .annotate(n=Count("id"))
        .order_by()
    }
    return [
        SessionSummary(
            scope.session_name,
            scope.isolation,
            totals.get(scope.user_key, 0)
            if scope.isolation == ISOLATION_SESSION
            else per_session.get((scope.user_key, scope.scope_key), 0),
            scope.last_seen,
        )
        for scope in scopes
    ]


def forget_session(keys: ScopeKeys, actor: Actor) -> int:
    """Delete every episode written in this session (see the module docstring), all or nothing, audited
    as one batch (one `delete` entry per episode, sharing a batch id). Returns how many were deleted."""
    actor.require_bot(keys)
    in_session = Episode.objects.in_scope(keys.user_key).filter(scope_key=keys.scope_key)
    deleted = 0
    with transaction.atomic(), audit.batch():
        # Locked: a forget running beside this one (of all, or of one of them) waits, then finds
        # what is left, instead of a row gone between this read and its delete (a 404).
        ids = list(in_session.select_for_update().order_by("id").values_list("episode_id", flat=True))
        for batch in chunks(ids, FORGET_BATCH):
            deleted += episodes.delete(keys, actor, list(batch))
    return deleted


def episode_page(keys: ScopeKeys, status: str, cursor: str | None, limit: int, kind: str = "") -> KeysetPage:
    """A page of one scope's episodes of one status, newest stored first (GET /api/v1/episodes, the
    LangBot `!memory list`). `status` and `limit` must already be validated; a bad cursor is a
    ValidationError."""
    parsed = parse_cursor(cursor)
    rows = Episode.objects.in_scope(keys.user_key).filter(status=status)
    if kind:
        rows = rows.filter(kind=kind)
    page = keyset_page(rows, "id", f"{parsed[0]}{parsed[1]}" if parsed else None, limit)
    prefetch_metadata(page.items)  # each record carries its metadata: one query, not one per row
    return page
