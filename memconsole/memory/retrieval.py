"""Recall: semantic search within one scope, ranked (docs/design.md §4), each hit with its breakdown."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from django.conf import settings
from django.utils import timezone

from memconsole.lib import embeddings, metrics, vectors

from . import ranking
from .audit import Actor
from .errors import unavailable_on_failure
from .filters import EpisodeFilter
from .models import Episode
from .scopes import ScopeKeys
from .validation import EPISODE_ID_IN_TEXT, MAX_QUERY_CHARS, text, validate_statuses, validate_top_k


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


@metrics.timed("recall")
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
    """Semantic search within the scope, ranked by docs/design.md §4, each hit with its breakdown.

    `tags` keeps episodes carrying any of the tags; `statuses=None` (or []) searches active episodes.
    A query that is exactly an episode id of the scope returns that episode first.
    Reads are not audited. Raises `Unavailable` when the index or the model fails.
    """
    if actor is not None:
        actor.require_bot(keys)
    query = text(query, "query", MAX_QUERY_CHARS, required=True)
    top_k = validate_top_k(top_k)
    found = EpisodeFilter.build(
        keys,
        statuses=validate_statuses(statuses),
        tags=tags,
        sender_id=sender_id,
        importance_min=importance_min,
        time_after=time_after,
        time_before=time_before,
    )
    with unavailable_on_failure():
        rows, similarities = _nearest(keys, query, top_k, found)
        return _ranked(query, rows, similarities, top_k, current_speaker_id)


def _nearest(keys: ScopeKeys, query: str, top_k: int, found: EpisodeFilter) -> tuple[list[Episode], dict[str, float]]:
    """The rows passing the filter among the query's nearest vectors, and their similarities."""
    model_id = embeddings.current_model_id()
    vector = embeddings.embed_query([query])[0]
    similarities: dict[str, float] = {}
    # Over-fetch so that re-ranking by recency and weights can lift a less similar episode.
    # When filters are so narrow that the nearest 1,000 hold too few matches, the index filters too.
    passes: list[tuple[int, dict[str, Any] | None]] = [(max(50, top_k * 5), None), (1000, None)]
    index_where = found.index_where()
    if index_where:
        passes.append((max(50, top_k * 5), index_where))
    episodes = found.episodes()
    rows: list[Episode] = []
    for fetch, index_filter in passes:
        hits = vectors.query(keys.user_key, model_id, vector, fetch, where=index_filter)
        # The collection is the scope's own (vectors.query checks its owner); rows are re-filtered
        # by user_key in SQL below, so no hit of another scope can surface.
        similarities.update({h.episode_id: h.similarity for h in hits})
        rows = list(episodes.with_ids(list(similarities)))
        if len(rows) >= top_k or (len(hits) < fetch and index_filter is None):
            break
    # An episode id named in the query is found even when its vector is not near.
    for token in set(EPISODE_ID_IN_TEXT.findall(query.lower())) - set(similarities):
        row = episodes.filter(episode_id=token).first()
        if row is not None:
            rows.append(row)
            stored = vectors.get(keys.user_key, [token], include_embeddings=True).get(token)
            similarities[token] = float(np.dot(stored["embedding"], vector)) if stored else 0.0
    return rows, similarities


def _ranked(
    query: str, rows: list[Episode], similarities: dict[str, float], top_k: int, current_speaker_id: str | None
) -> list[RecallHit]:
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
    # A query that is an episode's id asks for that episode: it comes first, whatever its age or score.
    results.sort(
        key=lambda hit: (ranking.is_exact_id_query(query, hit.episode.episode_id), hit.score, hit.episode.id),
        reverse=True,
    )
    return results[:top_k]
