"""Write-behind vectors (docs/design.md §5, "The write path"): what is committed, and read-your-writes.

`remember` and `remember_many` commit each episode's vector (already computed to look for what it
supersedes) in the same transaction as the episode, its lexical entry and its audit entry
(`stash`), and return; the indexer (indexer.py) writes them into the vector index in batches and
deletes them. Until then the vector is here, so the episode is still found: recall and inject
search a scope's pending vectors exactly (`nearest`, cosine in numpy) beside the index and merge the
two (`merge`), and so does the supersede check of a correction. A crash between the commit and the
index write loses nothing: the backlog is drained when an indexer starts again (and by `reindex`).

Scope isolation: pending vectors are selected by the scope's user_key and then only for the rows
the caller's filtered, scope-bound queryset holds (status, sender, tags, time...), as the index's
own hits are re-filtered in SQL.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import numpy as np
from django.db.models import Min, QuerySet
from django.utils import timezone

from memconsole.lib import vectors

from .models import Episode
from .pending_models import PendingVector

__all__ = ["Backlog", "backlog", "merge", "nearest", "stash", "to_bytes", "to_vector"]


def to_bytes(vector: np.ndarray) -> bytes:
    return np.asarray(vector, dtype=np.float32).tobytes()


def to_vector(stored: bytes | memoryview) -> np.ndarray:
    return np.frombuffer(bytes(stored), dtype=np.float32)


def stash(episodes: list[Episode], vectors_: np.ndarray, model_id: str) -> None:
    """Inside the caller's transaction, after the episodes are saved: their vectors, for the indexer."""
    now = timezone.now()
    PendingVector.objects.bulk_create(
        [
            PendingVector(
                episode_id=episode.pk,
                user_key=episode.user_key,
                model_id=model_id,
                vector=to_bytes(vectors_[position]),
                version=episode.version,
                created_at=now,
            )
            for position, episode in enumerate(episodes)
        ]
    )


def nearest(user_key: str, model_id: str, vector: np.ndarray, rows: QuerySet[Episode]) -> list[vectors.Hit]:
    """Every pending vector of `user_key` made by `model_id` whose episode is among `rows` (a
    queryset already bound to that scope and filtered), with its exact cosine similarity to
    `vector`, most similar first. One indexed query when the scope has nothing pending."""
    waiting = list(
        PendingVector.objects.filter(user_key=user_key, model_id=model_id).values_list("episode_id", "vector")
    )
    if not waiting:
        return []
    allowed = dict(rows.filter(pk__in=[pk for pk, _ in waiting]).order_by().values_list("pk", "episode_id"))
    kept = [(allowed[pk], stored) for pk, stored in waiting if pk in allowed]
    if not kept:
        return []
    similarities = vectors.cosine(np.vstack([to_vector(stored) for _, stored in kept]), vector)
    hits = [vectors.Hit(episode_id, float(s), {}) for (episode_id, _), s in zip(kept, similarities, strict=True)]
    return sorted(hits, key=lambda hit: hit.similarity, reverse=True)


def merge(indexed: list[vectors.Hit], waiting: list[vectors.Hit], size: int) -> list[vectors.Hit]:
    """The `size` nearest of the index's hits and the pending ones together (an episode in both,
    being indexed right now, once)."""
    if not waiting:
        return indexed
    best: dict[str, vectors.Hit] = {}
    for hit in [*indexed, *waiting]:
        if hit.episode_id not in best or hit.similarity > best[hit.episode_id].similarity:
            best[hit.episode_id] = hit
    return sorted(best.values(), key=lambda hit: hit.similarity, reverse=True)[:size]


@dataclass(frozen=True)
class Backlog:
    count: int
    oldest: datetime | None

    @property
    def oldest_seconds(self) -> float:
        return max(0.0, (timezone.now() - self.oldest).total_seconds()) if self.oldest else 0.0

    def describe(self) -> str:
        if not self.count:
            return "no vector is waiting for the index"
        return f"{self.count} vectors waiting for the index, the oldest for {self.oldest_seconds:.1f} s"


def backlog() -> Backlog:
    """How many vectors wait for the indexer, and since when the oldest has."""
    found = PendingVector.objects.aggregate(oldest=Min("created_at"))
    count = PendingVector.objects.count() if found["oldest"] else 0
    return Backlog(count, found["oldest"])
