"""Corrections (docs/design.md §4, §8): what a correction superseded, and what undoing it gives back.

A correction lowers the importance of what it supersedes and records the importance it had in the
superseded episode's own `supersede` audit entry; a restore (the console's, or deleting or erasing
the correction) gives it back from there, unless the importance was changed since.
"""

from __future__ import annotations

from .models import ISOLATION_BOT, ISOLATION_SESSION, STATUS_SUPERSEDED, AuditEntry, Episode
from .paging import chunks
from .scopes import ScopeKeys, derive_scope

BATCH = 1000


def importance_before(keys: ScopeKeys, episode: Episode) -> int | None:
    """The importance a superseded episode had before its correction lowered it, from its
    `supersede` entry; None when unknown (imported superseded, redacted) or changed since."""
    entry = (
        AuditEntry.objects.filter(user_key=keys.user_key, target_id=episode.episode_id, operation="supersede")
        .filter(target_type="episode", redacted=False)
        .order_by("-id")
        .first()
    )
    if entry is None:
        return None
    before, after = entry.payload.get("before") or {}, entry.payload.get("after") or {}
    if after.get("superseded_by") != episode.superseded_by or after.get("importance") != episode.importance:
        return None
    value = before.get("importance")
    return value if isinstance(value, int) else None


def superseded_by(episode_ids: set[str]) -> dict[ScopeKeys, list[str]]:
    """{the space's keys: ids} of the episodes, not among `episode_ids`, that those superseded
    (locked for update: call inside the transaction that removes them)."""
    hidden: dict[tuple[str, str, str], list[str]] = {}
    for batch in chunks(sorted(episode_ids), BATCH):
        rows = Episode.objects.filter(status=STATUS_SUPERSEDED, superseded_by__in=batch).select_for_update()
        fields = ("bot_uuid", "scope_key", "user_key", "episode_id")
        for bot_uuid, scope_key, user_key, episode_id in rows.exclude(episode_id__in=episode_ids).values_list(*fields):
            hidden.setdefault((bot_uuid, scope_key, user_key), []).append(episode_id)
    return {_keys(*space): ids for space, ids in hidden.items()}


def _keys(bot_uuid: str, scope_key: str, user_key: str) -> ScopeKeys:
    """The keys of the space an episode is in, from its row: a chat used under both isolation modes
    has two spaces with one scope_key, told apart by the user_key."""
    session = scope_key.split(":", 1)[1] if bot_uuid else scope_key
    return derive_scope(bot_uuid, session, ISOLATION_SESSION if user_key == scope_key else ISOLATION_BOT)
