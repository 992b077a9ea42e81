"""The row <-> vector sync: what a vector's metadata says, writing vectors, and marking rows current.

The database is the source of truth and commits first; each episode records whether its vector is
current (`vector_current`, `vector_model`), so whatever the index missed `manage.py reindex` repairs.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from memconsole.lib import embeddings, vectors

from . import modelswitch
from .errors import unavailable_on_failure
from .models import Episode
from .paging import chunks
from .pending_models import PendingVector

log = logging.getLogger("memconsole.memory")

MARK_BATCH = 1000


def vector_metadata(episode: Episode) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "user_key": episode.user_key,
        "status": str(episode.status),
        "sender_id": episode.sender_id,
        "importance": episode.importance,
        "timestamp": episode.timestamp.timestamp() if episode.timestamp else 0.0,
    }
    if not episode.encrypted:  # with encryption on, nothing readable about content leaves the database
        meta["tags"] = ",".join(episode.tags)
    return meta


def index_episodes(episodes: list[Episode], vectors_: Any = None) -> int:
    """Embed (unless given) and write vectors for `episodes`, then mark them current.

    Returns how many were indexed. Raises `Unavailable` when the index refuses (or the model or
    key fails); the rows then stay marked not current for `reindex`.
    """
    if not episodes:
        return 0
    with unavailable_on_failure():
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
            # During a model switch, the collection still serving recall gets it too (its model).
            modelswitch.write_serving(
                user_key,
                [episodes[p].episode_id for p in positions],
                [episodes[p].content for p in positions],
                [vector_metadata(episodes[p]) for p in positions],
            )
    Episode.objects.filter(pk__in=[e.pk for e in episodes]).update(vector_current=True, vector_model=model_id)
    # A vector waiting for the write-behind indexer (pending.py) is obsolete now.
    PendingVector.objects.filter(episode_id__in=[e.pk for e in episodes]).delete()
    for episode in episodes:
        episode.vector_current, episode.vector_model = True, model_id
    return len(episodes)


def sync_vector_metadata(episodes: list[Episode]) -> None:
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


def same_metadata(stored: dict[str, Any], expected: dict[str, Any]) -> bool:
    """Whether a vector's stored metadata says what the row says (timestamps to the millisecond)."""
    if set(stored) != set(expected):
        return False
    for key, want in expected.items():
        have = stored[key]
        if isinstance(want, float) or isinstance(have, float):
            if not isinstance(have, (int, float)) or isinstance(have, bool):
                return False
            if not math.isclose(float(have), float(want), rel_tol=0, abs_tol=1e-3):
                return False
        elif have != want:
            return False
    return True


def metadata_patch(stored: dict[str, Any] | None, expected: dict[str, Any]) -> dict[str, Any]:
    """Chroma merges metadata on update and upsert; a key set to None is removed."""
    patch = dict(expected)
    for key in stored or {}:
        if key not in expected:
            patch[key] = None
    return patch


def mark_not_current(user_key: str) -> list[int]:
    """Mark the rows of `user_key` whose vector is current as not current; returns their keys."""
    pks = list(Episode.objects.in_scope(user_key).filter(vector_current=True).values_list("pk", flat=True))
    for batch in chunks(pks, MARK_BATCH):
        Episode.objects.filter(pk__in=batch).update(vector_current=False)
    return pks


def mark_current(user_key: str, pks: list[int]) -> None:
    """Mark current again those of `pks` whose vector the (rebuilt) collection holds."""
    kept = set(vectors.all_ids(user_key))
    for batch in chunks(pks, MARK_BATCH):
        rows = Episode.objects.filter(pk__in=batch).values_list("pk", "episode_id")
        Episode.objects.filter(pk__in=[pk for pk, episode_id in rows if episode_id in kept]).update(vector_current=True)
