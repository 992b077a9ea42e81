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


def importances_before(keys: ScopeKeys, episodes: list[Episode]) -> dict[str, int]:
    """{episode id: the importance it had before its correction lowered it}, from each superseded
    episode's newest `supersede` entry; an episode is left out when that is unknown (imported
    superseded, redacted) or changed since."""
    newest: dict[str, AuditEntry] = {}
    for batch in chunks(sorted({e.episode_id for e in episodes}), BATCH):
        entries = AuditEntry.objects.filter(user_key=keys.user_key, target_id__in=batch, operation="supersede")
        for row in entries.filter(target_type="episode", redacted=False).order_by("id"):
            newest[row.target_id] = row
    found = {}
    for episode in episodes:
        entry = newest.get(episode.episode_id)
        if entry is None:
            continue
        before, after = entry.payload.get("before") or {}, entry.payload.get("after") or {}
        if after.get("superseded_by") != episode.superseded_by or after.get("importance") != episode.importance:
            continue
        if isinstance(value := before.get("importance"), int):
            found[episode.episode_id] = value
    return found


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
