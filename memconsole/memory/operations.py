"""Memory operations: the only way anything reads or changes memory.

Every function takes the scope's derived keys and an `Actor`, touches nothing outside that scope,
and writes its audit entry in the same database transaction as its change. The database commits
first; the vector index follows, and each episode records whether its vector is current, so a
crash between the two loses nothing (`manage.py reindex` repairs the index).
"""

from __future__ import annotations

import logging
import re
import secrets
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
from django.conf import settings
from django.db import transaction
from django.db.models import F, Q, QuerySet
from django.utils import timezone

from memconsole.lib import embeddings, vectors

from . import audit, ranking
from .audit import Actor
from .errors import NotFound, PermissionDenied, ValidationError
from .models import (
    PROFILE_SESSION,
    PROFILE_SPEAKER,
    SOURCES,
    STATUS_ACTIVE,
    STATUS_ARCHIVED,
    STATUS_SUPERSEDED,
    STATUSES,
    Episode,
    EpisodeCounts,
    InjectionSnapshot,
    Profile,
    ProfileVersion,
    Scope,
)
from .paging import keyset_page
from .scopes import ScopeKeys, register_scope

log = logging.getLogger("memconsole.memory")

MAX_TAGS = 20
MAX_TAG_CHARS = 64
MAX_SENDER_CHARS = 255
MAX_TRAITS = 20
MAX_PREFERENCES = 10
MAX_ITEM_CHARS = 200
MAX_NOTES = 2000
MAX_PROFILE_NAME = 100
MAX_QUERY_CHARS = 2000
TOP_K_MAX = 50
PAGE_SIZES = (10, 25, 50)
EPISODE_ID = re.compile(r"^[0-9a-f]{12}$")
CURSOR = re.compile(r"[ab][0-9]{1,18}")  # ASCII digits only ("²" is a digit to isdigit), within 64 bits


# --- validation ---------------------------------------------------------------------------------


def _allow(actor: Actor, keys: ScopeKeys) -> None:
    if actor.bot_uuids is not None and keys.bot_uuid not in actor.bot_uuids:
        raise PermissionDenied("this actor may not use this bot's memory")


def max_content_chars() -> int:
    return settings.MEMCONSOLE_MAX_CONTENT_CHARS


def _is_utf8(value: str) -> bool:
    """False for strings no database or tokenizer can take (lone surrogates, e.g. from JSON "\\ud800")."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _text(value: Any, name: str, max_chars: int, required: bool = False) -> str:
    if value is None:
        value = ""
    if not isinstance(value, str):
        raise ValidationError(f"{name} must be a string", field=name)
    if "\x00" in value:
        raise ValidationError(f"{name} contains a NUL character", field=name)
    if not _is_utf8(value):
        raise ValidationError(f"{name} is not valid text (it holds a lone surrogate)", field=name)
    if required and not value.strip():
        raise ValidationError(f"{name} must not be empty", field=name)
    if len(value) > max_chars:
        raise ValidationError(f"{name} is longer than {max_chars} characters", field=name)
    return value


def validate_tags(tags: Any) -> list[str]:
    if tags is None:
        return []
    if isinstance(tags, str) or not isinstance(tags, (list, tuple)):
        raise ValidationError("tags must be a list of strings", field="tags")
    out: list[str] = []
    for tag in tags:
        tag = _text(tag, "tags", MAX_TAG_CHARS).strip()
        if "," in tag:
            raise ValidationError("a tag may not contain a comma", field="tags")
        if tag and tag not in out:
            out.append(tag)
    if len(out) > MAX_TAGS:
        raise ValidationError(f"at most {MAX_TAGS} tags", field="tags")
    return out


def validate_importance(value: Any, name: str = "importance") -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(f"{name} must be a whole number from 1 to 5", field=name)
    if not 1 <= value <= 5:
        raise ValidationError(f"{name} must be from 1 to 5", field=name)
    return value


def validate_statuses(statuses: Any) -> list[str]:
    if statuses is None:
        return [STATUS_ACTIVE]
    if isinstance(statuses, str) or not isinstance(statuses, (list, tuple, set, frozenset)):
        raise ValidationError("statuses must be a list", field="statuses")
    out = []
    for status in statuses:
        if status not in STATUSES:
            raise ValidationError(f"unknown status {status!r} (use {', '.join(STATUSES)})", field="statuses")
        if status not in out:
            out.append(status)
    if not out:
        raise ValidationError("statuses must name at least one status", field="statuses")
    return out


def _datetime(value: Any, name: str) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, datetime):
        raise ValidationError(f"{name} must be a date and time", field=name)
    if timezone.is_naive(value):
        raise ValidationError(f"{name} must carry a time zone", field=name)
    try:
        value.astimezone(UTC)  # stored and compared in UTC: 9999-12-31T23:00-05:00 has no UTC time
    except (OverflowError, ValueError):
        raise ValidationError(f"{name} is out of range", field=name) from None
    return value


def tags_text(tags: list[str]) -> str:
    return "," + ",".join(tags) + "," if tags else ""


# --- counters -----------------------------------------------------------------------------------


def _count(user_key: str, **deltas: int) -> None:
    counts, _ = EpisodeCounts.objects.get_or_create(user_key=user_key)
    EpisodeCounts.objects.filter(pk=counts.pk).update(
        last_activity=timezone.now(), **{name: F(name) + delta for name, delta in deltas.items() if delta}
    )


def recount(user_key: str) -> EpisodeCounts:
    """Recompute one user_key's counters from the rows (after bulk loads and imports).

    Inside a transaction that appends to the audit log, call `audit.lock_chain()` first (see there).
    """
    with transaction.atomic():
        EpisodeCounts.objects.get_or_create(user_key=user_key)
        # Locked before counting: a concurrent remember's increment then either commits before the
        # count (and is counted) or waits for this save (and is applied on top), never lost.
        counts = EpisodeCounts.objects.select_for_update().get(user_key=user_key)
        rows = Episode.objects.filter(user_key=user_key)
        counts.active = rows.filter(status=STATUS_ACTIVE).count()
        counts.superseded = rows.filter(status=STATUS_SUPERSEDED).count()
        counts.archived = rows.filter(status=STATUS_ARCHIVED).count()
        counts.save()
    return counts


# --- the vector side ----------------------------------------------------------------------------


def vector_metadata(episode: Episode) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "user_key": episode.user_key,
        "status": episode.status,
        "sender_id": episode.sender_id,
        "importance": episode.importance,
        "timestamp": episode.timestamp.timestamp() if episode.timestamp else 0.0,
    }
    if not episode.encrypted:  # with encryption on, nothing readable about content leaves the database
        meta["tags"] = ",".join(episode.tags)
    return meta


def index_episodes(episodes: list[Episode], vectors_: Any = None) -> int:
    """Embed (unless given) and write vectors for `episodes`, then mark them current.

    Returns how many were indexed. Raises `VectorIndexError` when the index refuses; the rows then
    stay marked not current for `reindex`.
    """
    if not episodes:
        return 0
    model_id = embeddings.current_model_id()
    if vectors_ is None:
        vectors_ = embeddings.embed([episode.content for episode in episodes])
    by_key: dict[str, list[int]] = {}
    for position, episode in enumerate(episodes):
        by_key.setdefault(episode.user_key, []).append(position)
    for user_key, positions in by_key.items():
        vectors.upsert(
            user_key,
            model_id,
            [episodes[p].episode_id for p in positions],
            vectors_[positions],
            [vector_metadata(episodes[p]) for p in positions],
        )
    Episode.objects.filter(pk__in=[e.pk for e in episodes]).update(vector_current=True, vector_model=model_id)
    for episode in episodes:
        episode.vector_current, episode.vector_model = True, model_id
    return len(episodes)


def _sync_vector_metadata(episodes: list[Episode]) -> None:
    """After a status change: update each vector's metadata, or leave it marked not current."""
    if not episodes:
        return
    Episode.objects.filter(pk__in=[e.pk for e in episodes]).update(vector_current=False)
    updated: set[str] = set()
    try:
        for episode in episodes:
            updated.update(vectors.update_metadata(episode.user_key, [episode.episode_id], [vector_metadata(episode)]))
    except vectors.VectorIndexError:
        log.exception("vector metadata update failed; `manage.py reindex` will repair it")
    # Only those whose vector was there to update: one never indexed (the index refused it) stays
    # not current for `reindex`.
    current = [e.pk for e in episodes if e.episode_id in updated]
    if current:
        Episode.objects.filter(pk__in=current).update(vector_current=True)


def new_episode_id() -> str:
    return secrets.token_hex(6)


# --- remember -----------------------------------------------------------------------------------


@dataclass
class RememberResult:
    episode: Episode
    superseded: list[str]
    indexed: bool


def _episode_snapshot(episode: Episode) -> dict[str, Any]:
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
    }


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
    query_id: str = "",
) -> RememberResult:
    """Store one episode; a correction/fact-update/clarification supersedes active episodes of the
    same user_key whose similarity to it is at least 0.85, in the same audited transaction."""
    _allow(actor, keys)
    content = _text(content, "content", max_content_chars(), required=True)
    tags = validate_tags(tags)
    importance = validate_importance(importance)
    sender_id = _text(sender_id, "sender_id", MAX_SENDER_CHARS)
    sender_name = _text(sender_name, "sender_name", MAX_SENDER_CHARS)
    timestamp = _datetime(timestamp, "timestamp") or timezone.now()
    if source not in SOURCES:
        raise ValidationError(f"unknown source {source!r}", field="source")

    model_id = embeddings.current_model_id()
    vector = embeddings.embed([content])
    candidates: list[str] = []
    supersede_skipped = ""
    if ranking.SUPERSEDING_TAGS.intersection(tags):
        # Only active episodes can be superseded: filter in the index, or archived and superseded
        # near-duplicates would fill the 20 nearest and hide the active one.
        try:
            hits = vectors.query(keys.user_key, model_id, vector[0], 20, where={"status": STATUS_ACTIVE})
        except vectors.VectorIndexError as exc:
            # The episode itself must not be lost because the index is down or needs a reindex:
            # store it, record in its audit entry that nothing was superseded and why.
            log.error("correction stored without supersede check: %s", exc)
            supersede_skipped = str(exc)
            hits = []
        candidates = [h.episode_id for h in hits if h.similarity >= ranking.SUPERSEDE_THRESHOLD]

    now = timezone.now()
    with transaction.atomic():
        register_scope(keys)
        episode = Episode(
            episode_id=new_episode_id(),
            user_key=keys.user_key,
            scope_key=keys.scope_key,
            tags=tags,
            tags_text=tags_text(tags),
            importance=importance,
            timestamp=timestamp,
            sender_id=sender_id,
            sender_name=sender_name,
            bot_uuid=keys.bot_uuid,
            source=source,
            created_at=now,
            updated_at=now,
        )
        episode.set_content(content)
        episode.save(force_insert=True)
        superseded = list(
            episodes_by_ids(Q(user_key=keys.user_key, status=STATUS_ACTIVE), candidates).select_for_update()
        )
        for old in superseded:
            old.status = STATUS_SUPERSEDED
            old.superseded_by = episode.episode_id
            old.importance = max(1, old.importance - 1)
            old.updated_at = now
            old.save(update_fields=["status", "superseded_by", "importance", "updated_at"])
        audit.append(
            "remember",
            actor,
            scope_key=keys.scope_key,
            user_key=keys.user_key,
            sender_id=sender_id,
            sender_name=sender_name,
            target_type="episode",
            target_id=episode.episode_id,
            query_id=query_id,
            summary=f"remembered: {content}",
            after=_episode_snapshot(episode),
            metadata={
                "superseded": [old.episode_id for old in superseded],
                "source": source,
                **({"supersede_skipped": supersede_skipped} if supersede_skipped else {}),
            },
        )
        _count(keys.user_key, active=1 - len(superseded), superseded=len(superseded))

    indexed = True
    try:
        index_episodes([episode], vector)
    except vectors.VectorIndexError:
        log.exception("episode %s saved but not indexed; `manage.py reindex` will index it", episode.episode_id)
        indexed = False
    _sync_vector_metadata(superseded)
    return RememberResult(episode, [old.episode_id for old in superseded], indexed)


# --- reading ------------------------------------------------------------------------------------


def get_episode(keys: ScopeKeys, episode_id: Any) -> Episode:
    """The episode with this id in this scope; `NotFound` whether it is absent or elsewhere."""
    if not isinstance(episode_id, str) or not EPISODE_ID.match(episode_id):
        raise NotFound("no such episode in this scope")
    episode = Episode.objects.filter(user_key=keys.user_key, episode_id=episode_id).first()
    if episode is None:
        raise NotFound("no such episode in this scope")
    return episode


@dataclass
class EpisodePage:
    episodes: list[Episode]
    next_cursor: str | None
    previous_cursor: str | None


def parse_cursor(cursor: Any) -> tuple[str, int] | None:
    if cursor in (None, ""):
        return None
    if isinstance(cursor, str) and CURSOR.fullmatch(cursor):
        return cursor[0], int(cursor[1:])
    raise ValidationError("bad page cursor", field="cursor")


def episode_filter(
    keys: ScopeKeys,
    *,
    statuses: Any = None,
    sender_id: Any = None,
    tag: Any = None,
    importance_min: Any = None,
    time_after: Any = None,
    time_before: Any = None,
) -> Q:
    """The WHERE clause for a scope's episodes with the given filters (validated)."""
    where = Q(user_key=keys.user_key)
    if statuses is not None:
        statuses = validate_statuses(statuses)
        if set(statuses) != set(STATUSES):
            where &= Q(status__in=statuses)
    if sender_id:
        where &= Q(sender_id=_text(sender_id, "sender_id", MAX_SENDER_CHARS))
    if tag:
        tag = _text(tag, "tag", MAX_TAG_CHARS).strip()
        # icontains: SQLite's LIKE ignores ASCII case anyway, so match tags that way on every database.
        where &= Q(tags_text__icontains="," + tag + ",")
    if importance_min is not None:
        where &= Q(importance__gte=validate_importance(importance_min, "importance_min"))
    if time_after is not None:
        where &= Q(timestamp__gte=_datetime(time_after, "time_after"))
    if time_before is not None:
        where &= Q(timestamp__lt=_datetime(time_before, "time_before"))
    return where


def episodes_by_ids(where: Q, episode_ids: Iterable[str]) -> QuerySet[Episode]:
    """The episodes matching `where` (which must filter by user_key) among `episode_ids`.

    Written as `id IN (SELECT id ... WHERE episode_id IN (...))` on purpose: for
    `user_key = ? AND episode_id IN (...)` SQLite's planner, which has no statistics, picks a
    (user_key, ...) index and walks every row of the scope (36 ms at 20,000 episodes, linear in
    the scope; bench/ and docs/benchmarks.md). This form seeks the (user_key, [status|sender_id],
    id) indexes instead, at any scope size, and is planned well on PostgreSQL too.
    """
    return Episode.objects.filter(where, pk__in=Episode.objects.filter(episode_id__in=list(episode_ids)).values("pk"))


def list_episodes(keys: ScopeKeys, *, cursor: Any = None, limit: int = 25, **filters: Any) -> EpisodePage:
    """A page of a scope's episodes, newest first, by keyset (never OFFSET).

    Cursors: "a<id>" = the page after (older than) id, "b<id>" = the page before (newer than) id.
    `statuses=None` lists every status.
    """
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 200:
        raise ValidationError("page size out of range", field="limit")
    where = episode_filter(keys, **filters)
    parse_cursor(cursor)  # ValidationError for a malformed one
    page = keyset_page(Episode.objects.filter(where), "id", cursor or None, limit)
    return EpisodePage(page.items, page.next_cursor, page.previous_cursor)


def _index_where(keys: ScopeKeys, statuses, sender_id, importance_min, time_after, time_before) -> dict | None:
    """The same filters (already validated) in Chroma's metadata filter language, or None."""
    clauses: list[dict] = [{"user_key": keys.user_key}]
    if set(statuses) != set(STATUSES):
        clauses.append({"status": {"$in": list(statuses)}})
    if sender_id:
        clauses.append({"sender_id": sender_id})
    if importance_min is not None:
        clauses.append({"importance": {"$gte": importance_min}})
    if time_after is not None:
        clauses.append({"timestamp": {"$gte": time_after.timestamp()}})
    if time_before is not None:
        clauses.append({"timestamp": {"$lt": time_before.timestamp()}})
    if len(clauses) == 1:
        return None
    return {"$and": clauses}


@dataclass
class RecallHit:
    episode: Episode
    score: float
    breakdown: ranking.Breakdown

    def as_dict(self) -> dict[str, Any]:
        e = self.episode
        return {
            "episode_id": e.episode_id,
            "content": e.content,
            "score": round(self.score, 6),
            "breakdown": self.breakdown.as_dict(),
            "tags": e.tags,
            "importance": e.importance,
            "timestamp": e.timestamp.isoformat() if e.timestamp else None,
            "sender_id": e.sender_id,
            "sender_name": e.sender_name,
            "status": e.effective_status,
        }


def recall(
    keys: ScopeKeys,
    query: Any,
    *,
    top_k: Any = 5,
    importance_min: Any = None,
    sender_id: Any = None,
    time_after: Any = None,
    time_before: Any = None,
    tags: Any = None,
    statuses: Any = None,
    current_speaker_id: str | None = None,
    actor: Actor | None = None,
) -> list[RecallHit]:
    """Semantic search within the scope, ranked by DESIGN.md §4, each hit with its breakdown.

    `tags` keeps episodes carrying any of the tags. Reads are not audited.
    """
    if actor is not None:
        _allow(actor, keys)
    query = _text(query, "query", MAX_QUERY_CHARS, required=True)
    if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= TOP_K_MAX:
        raise ValidationError(f"top_k must be a whole number from 1 to {TOP_K_MAX}", field="top_k")
    statuses = validate_statuses(statuses)
    wanted_tags = validate_tags(tags)
    where = episode_filter(
        keys,
        statuses=statuses,
        sender_id=sender_id,
        importance_min=importance_min,
        time_after=time_after,
        time_before=time_before,
    )
    if wanted_tags:
        tag_q = Q()
        for tag in wanted_tags:
            tag_q |= Q(tags_text__icontains="," + tag + ",")
        where &= tag_q

    model_id = embeddings.current_model_id()
    vector = embeddings.embed([query])[0]
    similarities: dict[str, float] = {}
    # Over-fetch so that re-ranking by recency and weights can lift a less similar episode.
    # When filters are so narrow that the nearest 1,000 hold too few matches, the index filters too.
    passes = [(max(50, top_k * 5), None), (1000, None)]
    index_where = _index_where(keys, statuses, sender_id, importance_min, time_after, time_before)
    if index_where:
        passes.append((max(50, top_k * 5), index_where))
    for fetch, index_filter in passes:
        hits = vectors.query(keys.user_key, model_id, vector, fetch, where=index_filter)
        # The collection is the scope's own (vectors.query checks its owner); rows are re-filtered
        # by user_key in SQL below, so no hit of another scope can surface.
        similarities.update({h.episode_id: h.similarity for h in hits})
        rows = list(episodes_by_ids(where, list(similarities)))
        if len(rows) >= top_k or (len(hits) < fetch and index_filter is None):
            break
    # An episode id named in the query is found even when its vector is not near.
    for token in set(re.findall(r"\b[0-9a-f]{12}\b", query.lower())) - set(similarities):
        row = Episode.objects.filter(where, episode_id=token).first()
        if row is not None:
            rows.append(row)
            stored = vectors.get(keys.user_key, [token], include_embeddings=True).get(token)
            similarities[token] = float(np.dot(stored["embedding"], vector)) if stored else 0.0

    now = timezone.now()
    half_life = settings.MEMCONSOLE_RECENCY_HALF_LIFE_DAYS
    results = []
    for row in rows:
        content = row.content
        exact = ranking.exact_score(query, row.episode_id, row.sender_id, row.sender_name, row.tags, content)
        parts = ranking.breakdown(
            similarity=similarities.get(row.episode_id, 0.0),
            timestamp=row.timestamp,
            importance=row.importance,
            episode_sender_id=row.sender_id,
            current_speaker_id=current_speaker_id,
            tags=row.tags,
            exact=exact,
            now=now,
            half_life_days=half_life,
        )
        results.append(RecallHit(row, parts.score, parts))
    results.sort(key=lambda hit: (hit.score, hit.episode.id), reverse=True)
    return results[:top_k]


# --- lifecycle ----------------------------------------------------------------------------------


def _episode_ids(episode_ids: Any) -> list[str]:
    """A list of episode ids as given, or ValidationError (anything else, e.g. an object, is refused)."""
    if isinstance(episode_ids, str) or not isinstance(episode_ids, (list, tuple, set, frozenset)):
        raise ValidationError("episode_ids must be a list of episode ids", field="episode_ids")
    if not all(isinstance(episode_id, str) for episode_id in episode_ids):
        raise ValidationError("episode ids must be strings", field="episode_ids")
    if not episode_ids:
        raise ValidationError("no episodes selected", field="episode_ids")
    return list(episode_ids)


def _set_status(keys: ScopeKeys, actor: Actor, episode_ids: list[str], status: str, operation: str) -> list[Episode]:
    _allow(actor, keys)
    episode_ids = _episode_ids(episode_ids)
    changed = []
    with transaction.atomic():
        rows = {e.episode_id: e for e in episodes_by_ids(Q(user_key=keys.user_key), episode_ids).select_for_update()}
        missing = [i for i in episode_ids if i not in rows]
        if missing:
            raise NotFound("no such episode in this scope")
        now = timezone.now()
        deltas: dict[str, int] = {}
        for episode_id in dict.fromkeys(episode_ids):
            episode = rows[episode_id]
            before = episode.effective_status
            if before == status and not (status == STATUS_ACTIVE and episode.superseded_by):
                continue
            episode.status = status
            if status == STATUS_ACTIVE:
                episode.superseded_by = ""
            episode.updated_at = now
            episode.save(update_fields=["status", "superseded_by", "updated_at"])
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
                summary=f"{operation}: {before} → {status}",
                before={"status": before},
                after={"status": status},
            )
            changed.append(episode)
        if deltas:
            _count(keys.user_key, **deltas)
    _sync_vector_metadata(changed)
    return changed


def archive(keys: ScopeKeys, actor: Actor, episode_ids: list[str]) -> list[Episode]:
    """Archive episodes (kept, searchable only when asked for). Returns those that changed."""
    return _set_status(keys, actor, episode_ids, STATUS_ARCHIVED, "archive")


def restore(keys: ScopeKeys, actor: Actor, episode_ids: list[str]) -> list[Episode]:
    """Make episodes active again, clearing `superseded_by`."""
    return _set_status(keys, actor, episode_ids, STATUS_ACTIVE, "restore")


def delete(keys: ScopeKeys, actor: Actor, episode_ids: list[str]) -> int:
    """Hard-delete episodes and their vectors; each audit entry keeps what was deleted."""
    _allow(actor, keys)
    episode_ids = _episode_ids(episode_ids)
    with transaction.atomic():
        rows = list(episodes_by_ids(Q(user_key=keys.user_key), episode_ids).select_for_update())
        if len(rows) != len(set(episode_ids)):
            raise NotFound("no such episode in this scope")
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
                summary=f"deleted: {episode.content}",
                before=_episode_snapshot(episode),
            )
            deltas[episode.effective_status] = deltas.get(episode.effective_status, 0) - 1
        Episode.objects.filter(pk__in=[e.pk for e in rows]).delete()
        _count(keys.user_key, **deltas)
    try:
        vectors.delete(keys.user_key, [e.episode_id for e in rows])
    except vectors.VectorIndexError:
        log.exception("episodes deleted but their vectors remain; `manage.py reindex` removes orphans")
    return len(rows)


# --- profiles -----------------------------------------------------------------------------------


EMPTY_PROFILE = {"name": "", "traits": [], "preferences": [], "notes": ""}


def _profile_type(profile_type: Any, sender_id: Any) -> tuple[str, str]:
    if profile_type not in (PROFILE_SESSION, PROFILE_SPEAKER):
        raise ValidationError("type must be 'session' or 'speaker'", field="type")
    sender_id = _text(sender_id, "sender_id", MAX_SENDER_CHARS).strip()
    if profile_type == PROFILE_SPEAKER and not sender_id:
        raise ValidationError("a speaker profile needs sender_id", field="sender_id")
    if profile_type == PROFILE_SESSION:
        sender_id = ""
    return profile_type, sender_id


def get_profile(keys: ScopeKeys, profile_type: Any, sender_id: Any = "") -> tuple[dict[str, Any], Profile | None]:
    """(profile data, row or None). Missing profiles read as empty."""
    profile_type, sender_id = _profile_type(profile_type, sender_id)
    row = Profile.objects.filter(scope_key=keys.scope_key, type=profile_type, sender_id=sender_id).first()
    if row is None:
        return dict(EMPTY_PROFILE, traits=[], preferences=[]), None
    return row.payload, row


def _items(value: Any, name: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        raise ValidationError(f"{name} must be a list of strings", field=name)
    return [_text(item, name, MAX_ITEM_CHARS, required=True).strip() for item in value]


def _apply_items(current: list[str], add: list[str], remove: list[str], limit: int, name: str) -> list[str]:
    removing = {item.casefold() for item in remove}
    result = [item for item in current if item.casefold() not in removing]
    for item in add:
        if item.casefold() not in {existing.casefold() for existing in result}:
            result.append(item)
    if len(result) > limit:
        raise ValidationError(f"a profile holds at most {limit} {name}", field=name)
    return result


def save_profile(
    keys: ScopeKeys,
    actor: Actor,
    profile_type: str,
    sender_id: str,
    data: dict,
    operation: str,
    summary: str,
    updated_at: datetime | None = None,
) -> Profile:
    """Store `data` (already validated) as the profile's next version, audited with before and
    after, inside the caller's transaction. `updated_at` keeps an imported profile's own time."""
    now = timezone.now()
    row = (
        Profile.objects.select_for_update()
        .filter(scope_key=keys.scope_key, type=profile_type, sender_id=sender_id)
        .first()
    )
    before = row.payload if row else None
    if row is None:
        row = Profile(scope_key=keys.scope_key, type=profile_type, sender_id=sender_id, version=0)
    row.version += 1
    row.updated_at = updated_at or now
    row.set_payload(data)
    row.save()
    version = ProfileVersion(profile=row, version=row.version, created_at=now, actor=actor.label[:255])
    version.set_payload(data)
    version.save(force_insert=True)
    audit.append(
        operation,
        actor,
        scope_key=keys.scope_key,
        user_key=keys.user_key,
        sender_id=sender_id,
        sender_name=data.get("name", "") if profile_type == PROFILE_SPEAKER else "",
        target_type=f"{profile_type}_profile",
        target_id=f"{profile_type}:{sender_id}" if sender_id else profile_type,
        summary=summary,
        before=before,
        after=data,
        metadata={"version": row.version},
    )
    return row


def update_profile(
    keys: ScopeKeys,
    actor: Actor,
    profile_type: Any,
    sender_id: Any = "",
    *,
    name: Any = None,
    notes: Any = None,
    add_traits: Any = None,
    remove_traits: Any = None,
    add_preferences: Any = None,
    remove_preferences: Any = None,
) -> Profile:
    """Change a profile within its limits, keeping every previous version. Audited."""
    _allow(actor, keys)
    profile_type, sender_id = _profile_type(profile_type, sender_id)
    if name is not None:
        name = _text(name, "name", MAX_PROFILE_NAME).strip()
    if notes is not None:
        notes = _text(notes, "notes", MAX_NOTES)
    add_traits, remove_traits = _items(add_traits, "traits"), _items(remove_traits, "traits")
    add_preferences, remove_preferences = (
        _items(add_preferences, "preferences"),
        _items(remove_preferences, "preferences"),
    )
    with transaction.atomic():
        scope = register_scope(keys)
        if scope.pk is not None:
            # Queue read-modify-writes of this scope's profiles: on PostgreSQL two concurrent updates
            # would otherwise read the same version and the later would drop the earlier's change
            # (SQLite's IMMEDIATE transactions already serialise them).
            Scope.objects.select_for_update().filter(pk=scope.pk).first()
        current, _ = get_profile(keys, profile_type, sender_id)
        data = {
            "name": current.get("name", "") if name is None else name,
            "traits": _apply_items(current.get("traits", []), add_traits, remove_traits, MAX_TRAITS, "traits"),
            "preferences": _apply_items(
                current.get("preferences", []), add_preferences, remove_preferences, MAX_PREFERENCES, "preferences"
            ),
            "notes": current.get("notes", "") if notes is None else notes,
        }
        return save_profile(
            keys, actor, profile_type, sender_id, data, "profile_update", f"{profile_type} profile updated"
        )


def replace_profile(keys: ScopeKeys, actor: Actor, profile_type: Any, sender_id: Any, data: dict[str, Any]) -> Profile:
    """Set a whole profile (console edit form, imports) after validating every limit."""
    _allow(actor, keys)
    profile_type, sender_id = _profile_type(profile_type, sender_id)
    clean = validate_profile_data(data)
    with transaction.atomic():
        register_scope(keys)
        return save_profile(
            keys, actor, profile_type, sender_id, clean, "profile_update", f"{profile_type} profile edited"
        )


def validate_profile_data(data: Any) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise ValidationError("profile must be an object", field="profile")
    traits = _apply_items([], _items(data.get("traits"), "traits"), [], MAX_TRAITS, "traits")
    preferences = _apply_items([], _items(data.get("preferences"), "preferences"), [], MAX_PREFERENCES, "preferences")
    return {
        "name": _text(data.get("name"), "name", MAX_PROFILE_NAME).strip(),
        "traits": traits,
        "preferences": preferences,
        "notes": _text(data.get("notes"), "notes", MAX_NOTES),
    }


def rollback_profile(keys: ScopeKeys, actor: Actor, profile_type: Any, sender_id: Any, version: Any) -> Profile:
    """Make an earlier version current again (as a new version). Audited."""
    _allow(actor, keys)
    profile_type, sender_id = _profile_type(profile_type, sender_id)
    with transaction.atomic():
        row = Profile.objects.filter(scope_key=keys.scope_key, type=profile_type, sender_id=sender_id).first()
        if row is None:
            raise NotFound("no such profile in this scope")
        is_number = isinstance(version, int) and not isinstance(version, bool)
        old = row.versions.filter(version=version).first() if is_number else None
        if old is None:
            raise NotFound("no such profile version")
        return save_profile(
            keys,
            actor,
            profile_type,
            sender_id,
            old.payload,
            "profile_rollback",
            f"{profile_type} profile rolled back to v{version}",
        )


# --- injection ----------------------------------------------------------------------------------


def _profile_lines(data: dict[str, Any]) -> list[str]:
    lines = []
    if data.get("name"):
        lines.append(f"Name: {data['name']}")
    if data.get("traits"):
        lines.append("Traits: " + "; ".join(data["traits"]))
    if data.get("preferences"):
        lines.append("Preferences: " + "; ".join(data["preferences"]))
    if data.get("notes"):
        lines.append(f"Notes: {data['notes']}")
    return lines


def render_blocks(session_profile: dict, speaker: dict, speaker_profile: dict, hits: list[RecallHit]) -> list[str]:
    """The system blocks a bot receives, in order: session profile, speaker profile, memories."""
    blocks = []
    lines = _profile_lines(session_profile)
    if lines:
        blocks.append("[Session profile]\n" + "\n".join(lines))
    lines = _profile_lines(speaker_profile)
    if lines:
        who = speaker.get("name") or speaker.get("id")
        blocks.append(f"[Speaker profile: {who}]\n" + "\n".join(lines))
    if hits:
        rows = []
        for hit in hits:
            e = hit.episode
            when = e.timestamp.strftime("%Y-%m-%d") if e.timestamp else "undated"
            by = e.sender_name or e.sender_id or "unknown"
            rows.append(f"- ({when}) {by}: {e.content}")
        blocks.append("[Relevant memories]\n" + "\n".join(rows))
    return blocks


@dataclass
class Injection:
    context: dict[str, Any]
    system_blocks: list[str]
    snapshot: InjectionSnapshot
    hits: list[RecallHit] = field(default_factory=list)


def record_injection(
    keys: ScopeKeys,
    actor: Actor,
    query: Any,
    *,
    query_id: Any = "",
    sender_id: Any = "",
    sender_name: Any = "",
    top_k: Any = 3,
) -> Injection:
    """Build the memory injection for a prompt and store it as an InjectionSnapshot. Audited."""
    _allow(actor, keys)
    query_id = _text(query_id, "query_id", 255)
    sender_id = _text(sender_id, "sender_id", MAX_SENDER_CHARS)
    sender_name = _text(sender_name, "sender_name", MAX_SENDER_CHARS)
    hits = recall(keys, query, top_k=top_k, current_speaker_id=sender_id or None)
    session_profile, _ = get_profile(keys, PROFILE_SESSION)
    speaker_profile = get_profile(keys, PROFILE_SPEAKER, sender_id)[0] if sender_id else dict(EMPTY_PROFILE)
    speaker = {"id": sender_id, "name": sender_name or speaker_profile.get("name", "")}
    episodes = [hit.as_dict() for hit in hits]
    blocks = render_blocks(session_profile, speaker, speaker_profile, hits)
    context = {
        "speaker": speaker,
        "session_profile": session_profile,
        "speaker_profile": speaker_profile,
        "episodes": episodes,
    }
    chars = sum(len(block) for block in blocks)
    with transaction.atomic():
        register_scope(keys)
        snapshot = InjectionSnapshot(
            snapshot_id=secrets.token_hex(16),
            query_id=query_id,
            session_name=keys.session_name,
            scope_key=keys.scope_key,
            user_key=keys.user_key,
            isolation=keys.isolation,
            speaker_id=sender_id,
            episode_count=len(episodes),
            block_count=len(blocks),
            injected=bool(blocks),
            injection_chars=chars,
        )
        snapshot.set_payload({**context, "query": query, "system_blocks": blocks})
        snapshot.save(force_insert=True)
        audit.append(
            "inject",
            actor,
            scope_key=keys.scope_key,
            user_key=keys.user_key,
            sender_id=sender_id,
            sender_name=sender_name,
            target_type="snapshot",
            target_id=snapshot.snapshot_id,
            query_id=query_id,
            summary=f"injected {len(episodes)} episodes in {len(blocks)} blocks ({chars} chars)",
            metadata={"episode_ids": [e["episode_id"] for e in episodes]},
        )
    prune_snapshots()
    return Injection(context, blocks, snapshot, hits)


def prune_snapshots() -> int:
    """Delete snapshots older than MEMCONSOLE_SNAPSHOT_RETENTION_DAYS (0 keeps them all)."""
    days = settings.MEMCONSOLE_SNAPSHOT_RETENTION_DAYS
    if not days:
        return 0
    cutoff = timezone.now() - timedelta(days=days)
    old = list(InjectionSnapshot.objects.filter(recorded_at__lt=cutoff).values_list("pk", flat=True)[:500])
    if not old:
        return 0
    return InjectionSnapshot.objects.filter(pk__in=old).delete()[0]


def iter_in_batches(queryset, batch: int = 1000) -> Iterable[Any]:
    """Rows of `queryset` by ascending primary key, fetched `batch` at a time (constant memory)."""
    last = 0
    while True:
        rows = list(queryset.filter(pk__gt=last).order_by("pk")[:batch])
        if not rows:
            return
        yield from rows
        last = rows[-1].pk
