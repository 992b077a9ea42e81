"""Remember many episodes of one scope at once, all or nothing (`POST /api/v1/remember` with a list).

Each episode is checked, stored and audited exactly as `episodes.remember` does it (the same
`validate_new_episode`, `supersede_candidates` and `store_episode`), in order, as if they were
remembered one after another: a correction later in the batch supersedes an earlier episode of the
batch too. What a batch saves is the per-call cost: the texts are embedded in one model call, every
row, lexical entry, audit entry (one per episode, sharing one `audit.batch()` id, all written in
one statement by `audit.buffered()`), pending vector and counter is written in one transaction, and the vectors are written in one upsert per collection.

As for `remember`, the database commits first, with the vectors (pending.py), and the vector index
follows (indexer.py): when the index refuses the vectors, the episodes stay stored, found by recall
from their pending vectors, and the next drain (or `manage.py reindex`) indexes them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from memconsole.lib import embeddings, metrics

from . import audit, indexer, lexical, locks, pending, ranking, rowstate
from .audit import Actor
from .counters import count
from .episode_extras import EpisodeMetadata, metadata_row
from .episodes import RememberResult, build_episode, correction_lock, supersede_and_audit, supersede_candidates
from .errors import ValidationError, unavailable_on_failure
from .models import Episode
from .scopes import ScopeKeys, register_scope
from .sync import sync_vector_metadata
from .validation import NewEpisode, validate_new_episode

__all__ = ["ITEM_FIELDS", "BatchResult", "max_batch", "remember_many", "validate_batch"]

# What one item may say: `remember`'s keywords (the source is the batch's, the scope the caller's).
ITEM_FIELDS = frozenset(
    {"content", "tags", "importance", "sender_id", "sender_name", "timestamp", "query_id", "kind", "metadata"}
)


@dataclass
class BatchResult:
    results: list[RememberResult]  # in the order given; `status` as stored after the whole batch
    batch_id: str  # the audit entries' `batch_id`
    indexed: bool  # False: stored, but the vector index refused them (`manage.py reindex`)


def max_batch() -> int:
    """The most episodes one batch may hold (MEMCONSOLE_REMEMBER_BATCH_MAX)."""
    return int(settings.MEMCONSOLE_REMEMBER_BATCH_MAX)


def _item_error(position: int, exc: ValidationError) -> ValidationError:
    name = f"episodes[{position}]"
    return ValidationError(f"{name}: {exc.message}", field=f"{name}.{exc.field}" if exc.field else name)


def validate_batch(items: Any, source: str = "agent") -> list[NewEpisode]:
    """Every item checked as `remember` checks its input; the first bad one raises `ValidationError`
    naming its position and field (`episodes[3].content`), so nothing of the batch is written."""
    if isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Sequence):
        raise ValidationError("episodes must be a list of episodes", field="episodes")
    if not items:
        raise ValidationError("episodes must hold at least one episode", field="episodes")
    if len(items) > max_batch():
        raise ValidationError(
            f"a batch holds at most {max_batch()} episodes (MEMCONSOLE_REMEMBER_BATCH_MAX), not {len(items)}",
            field="episodes",
        )
    checked = []
    for position, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise _item_error(position, ValidationError("an episode must be an object"))
        unknown = sorted(set(item) - ITEM_FIELDS)
        if unknown:
            raise _item_error(position, ValidationError(f"unknown field {unknown[0]!r}", field=str(unknown[0])))
        try:
            checked.append(validate_new_episode(source=source, **item))
        except ValidationError as exc:
            raise _item_error(position, exc) from None
    return checked


def _earlier_in_batch(position: int, batch: list[NewEpisode], vectors_: Any) -> list[int]:
    """The positions before `position` a correction there would supersede if they had been
    remembered first: the same sender's, at least SUPERSEDE_THRESHOLD similar (still active is
    checked in the database, as for indexed candidates)."""
    new = batch[position]
    if not position or not ranking.supersedes(new.tags):
        return []
    similarity = vectors_[:position] @ vectors_[position]  # unit vectors: cosine similarity
    return [
        j
        for j in range(position)
        if batch[j].sender_id == new.sender_id and similarity[j] >= ranking.SUPERSEDE_THRESHOLD
    ]


def _lock_stored_candidates(keys: ScopeKeys, from_index: list[tuple[list[str], str]]) -> None:
    """Lock every stored episode the batch may supersede, in one statement in pk order, before the
    first audit entry locks the chain's head: a single `remember` locks its old episodes and then
    the head, so taking them the other way round mid-batch could deadlock with it (PostgreSQL)."""
    ids = sorted({episode_id for candidates, _ in from_index for episode_id in candidates})
    if ids:
        list(Episode.objects.in_scope(keys.user_key).with_ids(ids).select_for_update().order_by("pk").values_list("pk"))


@metrics.timed("remember_many")
def remember_many(keys: ScopeKeys, actor: Actor, items: Any, *, source: str = "agent") -> BatchResult:
    """Store every episode of `items` (dicts of `remember`'s keywords) in this scope, all or
    nothing: any invalid item raises `ValidationError` (naming it) before anything is written, and
    the embedding model failing raises `Unavailable`. Each episode gets its own audit entry, all of
    them one batch id; with the vector index down the episodes are still stored (not indexed)."""
    actor.require_bot(keys)
    batch = validate_batch(items, source)
    with unavailable_on_failure():
        model_id = embeddings.current_model_id()
        vectors_ = embeddings.embed([new.content for new in batch])
    superseded: list[list[Episode]] = []
    with audit.batch() as batch_id, transaction.atomic(), audit.buffered():
        # Its corrections' speakers first, as `remember` takes them: candidates looked for under the lock.
        locks.hold(*(correction_lock(keys, new.sender_id) for new in batch if ranking.supersedes(new.tags)))
        from_index = [supersede_candidates(keys, model_id, vectors_[i], new) for i, new in enumerate(batch)]
        register_scope(keys)
        now = timezone.now()
        unaudited = rowstate.take()  # the caller's, for the first entry; then the batch's own rows
        stored = Episode.objects.bulk_create([build_episode(keys, new, now) for new in batch])
        rowstate.take()  # each entry records its own episode (`rows`), not the whole batch
        lexical.index_episodes(stored)  # bulk_create skips the post_save receiver
        pending.stash(stored, vectors_, model_id)  # the vectors commit with the rows (write-behind)
        _lock_stored_candidates(keys, from_index)
        EpisodeMetadata.objects.bulk_create(
            [metadata_row(episode, new.metadata) for episode, new in zip(stored, batch, strict=True) if new.metadata]
        )
        for position, (episode, new) in enumerate(zip(stored, batch, strict=True)):
            candidates, skipped = from_index[position]
            earlier = [stored[j].episode_id for j in _earlier_in_batch(position, batch, vectors_)]
            rows = [*(unaudited if not position else ()), episode]
            olds = supersede_and_audit(
                keys, actor, new, episode, [*candidates, *earlier], now=now, supersede_skipped=skipped, rows=rows
            )
            superseded.append(olds)
        changed = sum(len(olds) for olds in superseded)
        count(keys.user_key, active=len(batch) - changed, superseded=changed)

    # An episode of the batch superseded later in it: its vector is written with its final state.
    positions = {episode.episode_id: position for position, episode in enumerate(stored)}
    outside = []
    for old in (old for olds in superseded for old in olds):
        if old.episode_id in positions:
            mine = stored[positions[old.episode_id]]
            mine.status, mine.superseded_by = old.status, old.superseded_by
            mine.importance, mine.updated_at = old.importance, old.updated_at
        else:
            outside.append(old)
    indexed = indexer.after_write(stored, vectors_)  # MEMCONSOLE_INDEXER: now (inline) or by the indexer
    sync_vector_metadata(outside)
    results = [
        RememberResult(episode, [old.episode_id for old in olds], indexed, new.adjusted)
        for episode, olds, new in zip(stored, superseded, batch, strict=True)
    ]
    return BatchResult(results, batch_id, indexed)
