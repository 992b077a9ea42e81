"""Episodes: remember, read, list, archive, restore and delete.

Every function takes the scope's derived keys and an `Actor`, touches nothing outside that scope,
and writes its audit entry in the same database transaction as its change. The database commits
first, with the episode's vector (pending.py); the vector index follows, written by the indexer
(indexer.py, MEMCONSOLE_INDEXER), and each episode records whether its vector is current, so a crash
between the two loses nothing (the next drain, or `manage.py reindex`, indexes it).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext_noop

from memconsole.lib import embeddings, metrics, vectors

from . import audit, corrections, indexer, locks, pending, ranking
from .audit import Actor
from .counters import count
from .episode_extras import prefetch_metadata, save_metadata
from .errors import NotFound, unavailable_on_failure
from .filters import EpisodeFilter
from .models import STATUS_ACTIVE, STATUS_ARCHIVED, STATUS_SUPERSEDED, Episode, new_episode_id
from .paging import keyset_page, parse_cursor
from .scopes import ScopeKeys, register_scope
from .sync import sync_vector_metadata
from .validation import NewEpisode, is_episode_id, validate_episode_ids, validate_list_limit, validate_new_episode
from .wording import said

REMEMBERED = gettext_noop("remembered: %(content)s")  # the summary of a new episode's audit entry
STATUS_CHANGED = {  # and of a status change, by its operation
    "archive": gettext_noop("archive: %(before)s → %(status)s"),
    "restore": gettext_noop("restore: %(before)s → %(status)s"),
}
SUPERSEDED = gettext_noop("superseded by %(correction)s")  # the superseded episode's own entry

__all__ = [
    "EpisodePage",
    "RememberResult",
    "archive",
    "build_episode",
    "delete",
    "episode_image",
    "get_episode",
    "list_episodes",
    "new_episode_id",
    "remember",
    "restore",
    "supersede_and_audit",
    "supersede_candidates",
]

log = logging.getLogger("memconsole.memory")


def episode_image(episode: Episode) -> dict[str, Any]:
    """The episode as its audit entries record it (`after` of a remember, `before` of a delete)."""
    return {
        "episode_id": episode.episode_id,
        "content": episode.content,
        "tags": episode.tags,
        "importance": episode.importance,
        "timestamp": episode.timestamp.isoformat() if episode.timestamp else None,
        "sender_id": episode.sender_id,
        "sender_name": episode.sender_name,
        "source": episode.source,
        "status": episode.status,
        "superseded_by": episode.superseded_by,
        "imported_episode_id": episode.imported_episode_id,
        "query_id": episode.query_id,
        "kind": episode.kind,
        "metadata": episode.metadata,
    }


# --- remember -----------------------------------------------------------------------------------


@dataclass
class RememberResult:
    episode: Episode
    superseded: list[str]
    indexed: bool  # False: stored, but the index refused it (inline); True too when the indexer will write it
    adjusted: list[str] = field(default_factory=list)  # inputs stored changed, e.g. ["importance"] (7 -> 5)


def supersede_candidates(keys: ScopeKeys, model_id: str, vector: Any, new: NewEpisode) -> tuple[list[str], str]:
    """The episodes (indexed or pending) a correction would supersede (`ranking.supersedes`): the same sender's
    active ones at least SUPERSEDE_THRESHOLD similar, and why none were looked for ("" if they were)."""
    if not ranking.supersedes(new.tags):
        return [], ""
    # Only the same sender's active episodes can be superseded (in a group chat one speaker's
    # correction must not hide another's memory): filter in the index, or inactive or other
    # speakers' near-duplicates would fill the 20 nearest and hide the one to supersede.
    same_sender = {"$and": [{"status": STATUS_ACTIVE.value}, {"sender_id": new.sender_id}]}
    # ... and the same sender's active episodes not indexed yet (a correction right after the original).
    mine = Episode.objects.in_scope(keys.user_key).filter(status=STATUS_ACTIVE, sender_id=new.sender_id)
    try:
        indexed = vectors.query(keys.user_key, model_id, vector, 20, where=same_sender)
        hits = pending.merge(indexed, pending.nearest(keys.user_key, model_id, vector, mine), 20)
    except vectors.VectorIndexError as exc:
        # The episode itself must not be lost because the index is down or needs a reindex:
        # store it, record in its audit entry that nothing was superseded and why.
        log.error("correction stored without supersede check: %s", exc)
        return [], str(exc)
    return [h.episode_id for h in hits if h.similarity >= ranking.SUPERSEDE_THRESHOLD], ""


def correction_lock(keys: ScopeKeys, sender_id: str) -> str:
    """The lock a speaker's corrections in a space take (`locks.hold`), one after another."""
    return f"supersede:{keys.user_key}\x1f{sender_id}"


def build_episode(keys: ScopeKeys, new: NewEpisode, now: datetime) -> Episode:
    """The (unsaved) row of a validated episode."""
    return Episode.create(
        keys,
        new.content,
        tags=new.tags,
        importance=new.importance,
        timestamp=new.timestamp,
        sender_id=new.sender_id,
        sender_name=new.sender_name,
        source=new.source,
        query_id=new.query_id,
        kind=new.kind,
        created_at=now,
        updated_at=now,
    )


def supersede_and_audit(
    keys: ScopeKeys,
    actor: Actor,
    new: NewEpisode,
    episode: Episode,
    candidates: list[str],
    *,
    now: datetime,
    supersede_skipped: str = "",
    rows: list[Any] | None = None,
) -> list[Episode]:
    """Inside the caller's `transaction.atomic()`, after saving `episode`: supersede those of
    `candidates` still active and of the same sender, and append the episode's audit entry (`rows`:
    rows saved without `save()`, for `audit.append`). Returns the episodes superseded; the caller
    counts them (`count`) and updates their vectors after the commit."""
    superseded = (
        list(
            Episode.objects.in_scope(keys.user_key)
            .filter(status=STATUS_ACTIVE, sender_id=new.sender_id)
            .with_ids(candidates)
            .select_for_update()
        )
        if candidates
        else []
    )
    was = {}
    for old in superseded:
        was[old.episode_id] = old.importance
        old.status = STATUS_SUPERSEDED
        old.superseded_by = episode.episode_id
        old.importance = ranking.superseded_importance(old.importance)
        old.updated_at = now
        old.save(update_fields=["status", "superseded_by", "importance", "updated_at"])
    if not new.metadata:  # known to have none: its image need not look for a metadata row
        Episode.metadata_row.related.set_cached_value(episode, None)
    audit.append(
        "remember",
        actor,
        scope_key=keys.scope_key,
        user_key=keys.user_key,
        sender_id=new.sender_id,
        sender_name=new.sender_name,
        target_type="episode",
        target_id=episode.episode_id,
        query_id=new.query_id,
        summary=said(REMEMBERED, content=new.content),
        after=episode_image(episode),
        metadata={
            "superseded": [old.episode_id for old in superseded],
            "source": new.source,
            **({"supersede_skipped": supersede_skipped} if supersede_skipped else {}),
            **({"adjusted": new.adjusted} if new.adjusted else {}),
        },
        rows=rows or (),
    )
    # Each its own entry, with what a restore gives back (`corrections`): in the correction's chat,
    # whose chain is held already (under bot isolation the superseded episode may be another chat's;
    # appending to that chain too could wait in a circle with a correction made there).
    for old in superseded:
        audit.append(
            "supersede",
            actor,
            scope_key=keys.scope_key,
            user_key=keys.user_key,
            sender_id=old.sender_id,
            target_type="episode",
            target_id=old.episode_id,
            summary=said(SUPERSEDED, correction=episode.episode_id),
            before={"status": STATUS_ACTIVE.value, "importance": was[old.episode_id]},
            after={"status": old.status, "importance": old.importance, "superseded_by": episode.episode_id},
        )
    return superseded


@metrics.timed("remember")
def remember(
    keys: ScopeKeys,
    actor: Actor,
    content: Any,
    *,
    tags: Any = None,
    importance: Any = 2,
    sender_id: Any = "",
    sender_name: Any = "",
    timestamp: Any = None,
    source: str = "agent",
    query_id: Any = "",
    kind: Any = "",
    metadata: Any = None,
) -> RememberResult:
    """Store one episode (content trimmed). A correction/fact-update/clarification tag, in any letter
    case, supersedes active episodes of the same user_key AND the same sender (none for none) whose
    similarity to it is at least 0.85, in the same audited transaction (docs/design.md §4).

    An importance outside 1-5 is stored clamped and named in `adjusted`; `query_id` (the message that
    produced the memory) is kept on the episode and its audit entry; `kind` (a short label) and
    `metadata` (a JSON object, sealed like content) are checked by `validate_kind`/`validate_metadata`.
    Raises `Unavailable` when the embedding model fails; with the vector index down the episode is
    still stored (not indexed, and nothing superseded). `batch_remember.remember_many` stores many.
    """
    actor.require_bot(keys)
    new = validate_new_episode(
        content,
        tags=tags,
        importance=importance,
        sender_id=sender_id,
        sender_name=sender_name,
        timestamp=timestamp,
        source=source,
        query_id=query_id,
        kind=kind,
        metadata=metadata,
    )
    with unavailable_on_failure():
        model_id = embeddings.current_model_id()
        vector = embeddings.embed([new.content])
    with transaction.atomic():
        if ranking.supersedes(new.tags):
            # Looked for under the lock: two corrections by one speaker at once each see the
            # other's episode, as if written one after the other (else both stay active).
            locks.hold(correction_lock(keys, new.sender_id))
        candidates, supersede_skipped = supersede_candidates(keys, model_id, vector[0], new)
        register_scope(keys)
        now = timezone.now()
        episode = build_episode(keys, new, now)
        episode.save(force_insert=True)
        save_metadata(episode, new.metadata)
        pending.stash([episode], vector, model_id)  # the vector commits with the row (write-behind)
        superseded = supersede_and_audit(
            keys, actor, new, episode, candidates, now=now, supersede_skipped=supersede_skipped
        )
        count(keys.user_key, active=1 - len(superseded), superseded=len(superseded))

    indexed = indexer.after_write([episode], vector)  # MEMCONSOLE_INDEXER: now (inline) or by the indexer
    sync_vector_metadata(superseded)
    return RememberResult(episode, [old.episode_id for old in superseded], indexed, new.adjusted)


# --- reading ------------------------------------------------------------------------------------


def get_episode(keys: ScopeKeys, episode_id: Any) -> Episode:
    """The episode with this id in this scope; `NotFound` whether it is absent or elsewhere."""
    if not is_episode_id(episode_id):
        raise NotFound("no such episode in this scope")
    episode = Episode.objects.in_scope(keys.user_key).filter(episode_id=episode_id).first()
    if episode is None:
        raise NotFound("no such episode in this scope")
    return episode


@dataclass
class EpisodePage:
    episodes: list[Episode]
    next_cursor: str | None
    previous_cursor: str | None


def list_episodes(keys: ScopeKeys, *, cursor: Any = None, limit: int = 25, **filters: Any) -> EpisodePage:
    """A page of a scope's episodes, newest first, by keyset (never OFFSET).

    Cursors: "a<id>" = the page after (older than) id, "b<id>" = the page before (newer than) id.
    `statuses=None` lists every status; the other filters are `EpisodeFilter.build`'s.
    """
    validate_list_limit(limit)
    episodes = EpisodeFilter.build(keys, **filters).episodes()
    parse_cursor(cursor)  # ValidationError for a malformed one
    page = keyset_page(episodes, "id", cursor or None, limit)
    return EpisodePage(page.items, page.next_cursor, page.previous_cursor)


# --- lifecycle ----------------------------------------------------------------------------------


def _set_status(
    keys: ScopeKeys, actor: Actor, episode_ids: Any, status: str, operation: str, note: dict[str, Any] | None = None
) -> list[Episode]:
    actor.require_bot(keys)
    episode_ids = validate_episode_ids(episode_ids)
    changed = []
    with transaction.atomic():
        in_scope = Episode.objects.in_scope(keys.user_key).with_ids(episode_ids).select_for_update()
        rows = {e.episode_id: e for e in in_scope}
        missing = [i for i in episode_ids if i not in rows]
        if missing:
            raise NotFound("no such episode in this scope")
        now = timezone.now()
        deltas: dict[str, int] = {}
        superseded = [e for e in rows.values() if e.effective_status == STATUS_SUPERSEDED]
        restored = corrections.importances_before(keys, superseded) if status == STATUS_ACTIVE else {}
        for episode_id in dict.fromkeys(episode_ids):
            episode = rows[episode_id]
            before = episode.effective_status
            if before == status and not (status == STATUS_ACTIVE and episode.superseded_by):
                continue
            importance = episode.importance
            if status == STATUS_ACTIVE and before == STATUS_SUPERSEDED:
                episode.importance = restored.get(episode_id, importance)
            episode.status = status
            if status == STATUS_ACTIVE:
                episode.superseded_by = ""
            episode.updated_at = now
            episode.save(update_fields=["status", "superseded_by", "importance", "updated_at"])
            deltas[before] = deltas.get(before, 0) - 1
            deltas[status] = deltas.get(status, 0) + 1
            audit.append(
                operation,
                actor,
                scope_key=episode.scope_key,
                user_key=keys.user_key,
                sender_id=episode.sender_id,
                target_type="episode",
                target_id=episode.episode_id,
                summary=said(STATUS_CHANGED[operation], statuses=("before", "status"), before=before, status=status),
                before={"status": before, **({"importance": importance} if episode.importance != importance else {})},
                after={
                    "status": status,
                    **({"importance": episode.importance} if episode.importance != importance else {}),
                },
                metadata=note,
            )
            changed.append(episode)
        if deltas:
            count(keys.user_key, **deltas)
    sync_vector_metadata(changed)
    return changed


def archive(
    keys: ScopeKeys, actor: Actor, episode_ids: list[str], *, note: dict[str, Any] | None = None
) -> list[Episode]:
    """Archive episodes (kept, searchable only when asked for). Returns those that changed. `note`
    goes into each audit entry's metadata (the reason of a fix made from an injection snapshot)."""
    return _set_status(keys, actor, episode_ids, STATUS_ARCHIVED.value, "archive", note)


def restore(
    keys: ScopeKeys, actor: Actor, episode_ids: list[str], *, note: dict[str, Any] | None = None
) -> list[Episode]:
    """Make episodes active again, clearing `superseded_by` (`note`: as `archive`'s)."""
    return _set_status(keys, actor, episode_ids, STATUS_ACTIVE.value, "restore", note)


def delete(keys: ScopeKeys, actor: Actor, episode_ids: list[str]) -> int:
    """Hard-delete episodes and their vectors; each audit entry keeps what was deleted. What a
    deleted correction had superseded is active again (restored, audited with the reason): the
    memory it corrected is no longer corrected."""
    actor.require_bot(keys)
    episode_ids = validate_episode_ids(episode_ids)
    with transaction.atomic():
        in_scope = Episode.objects.in_scope(keys.user_key)
        rows = list(in_scope.with_ids(episode_ids).select_for_update())
        if len(rows) != len(set(episode_ids)):
            raise NotFound("no such episode in this scope")
        corrected = list(  # locked now, before the chain's head, as every writer takes them
            in_scope.filter(status=STATUS_SUPERSEDED, superseded_by__in=episode_ids)
            .exclude(episode_id__in=episode_ids)
            .select_for_update()
        )
        # Every chain this appends to (the deleted episodes' and, under bot isolation, another
        # chat's restored ones), locked at once in chain order: two deletes never wait in a circle.
        audit.lock_chain(*{episode.scope_key for episode in [*rows, *corrected]})
        prefetch_metadata(rows)  # each audit entry keeps the deleted episode's metadata too
        deltas: dict[str, int] = {}
        for episode in rows:
            audit.append(
                "delete",
                actor,
                scope_key=episode.scope_key,
                user_key=keys.user_key,
                sender_id=episode.sender_id,
                sender_name=episode.sender_name,
                target_type="episode",
                target_id=episode.episode_id,
                summary=said(gettext_noop("deleted: %(content)s"), content=episode.content),
                before=episode_image(episode),
            )
            deltas[episode.effective_status] = deltas.get(episode.effective_status, 0) - 1
        Episode.objects.filter(pk__in=[e.pk for e in rows]).delete()
        count(keys.user_key, **deltas)
        for correction in sorted({old.superseded_by for old in corrected}):
            note = {"reason": "the correction that superseded it was deleted", "correction": correction}
            olds = [old.episode_id for old in corrected if old.superseded_by == correction]
            _set_status(keys, actor, olds, STATUS_ACTIVE.value, "restore", note)
    try:
        vectors.delete(keys.user_key, [e.episode_id for e in rows])
    except vectors.VectorIndexError:
        log.exception("episodes deleted but their vectors remain; `manage.py reindex` removes orphans")
    return len(rows)
