"""Corrections (docs/design.md §4, §8): what a correction superseded, and what undoing it gives back.

A correction lowers the importance of what it supersedes and records the importance it had in the
superseded episode's own `supersede` audit entry; a restore (the console's, or deleting or erasing
the correction) gives it back from there, unless the importance was changed since.
"""

from __future__ import annotations

from .models import STATUS_SUPERSEDED, AuditEntry, Episode
from .paging import chunks
from .scopes import ScopeKeys

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


def superseded_by(episode_ids: set[str]) -> dict[str, list[str]]:
    """{scope_key: ids} of the episodes, not among `episode_ids`, that those superseded (locked for
    update: call inside the transaction that removes them)."""
    hidden: dict[str, list[str]] = {}
    for batch in chunks(sorted(episode_ids), BATCH):
        rows = Episode.objects.filter(status=STATUS_SUPERSEDED, superseded_by__in=batch).select_for_update()
        for scope_key, episode_id in rows.exclude(episode_id__in=episode_ids).values_list("scope_key", "episode_id"):
            hidden.setdefault(scope_key, []).append(episode_id)
    return hidden
