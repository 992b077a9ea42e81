"""Recall: hybrid (vector + lexical), speaker-first search within one scope, ranked (docs/design.md §4).

Candidates come from the current speaker's own episodes first (vector and lexical), and from those
of any speaker the question names (`ranking.named_speakers`), then from the whole scope (LangBot's
two-stage retrieval); each gets a fused relevance, 0.7 × vector similarity + 0.3 × lexical score
(`ranking.relevance`; 0.3/0.7 for a Chinese, Japanese or Spanish query with an English-only
model). Below MEMCONSOLE_RECALL_MIN_SIMILARITY a candidate is dropped; the rest are ranked by
relevance × recency × importance × speaker × update × exact (a first-person question's asker's own
episodes first, by that score without recency; likewise a named speaker's) and cut at top_k.
`retrieve` keeps every candidate with the reason it was kept or dropped (the injection snapshot
stores them); `recall` returns the hits.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from django.conf import settings
from django.utils import timezone

from memconsole.lib import embeddings, metrics, vectors

from . import pending, people, ranking, reembed
from .audit import Actor
from .episode_extras import prefetch_metadata
from .errors import unavailable_on_failure
from .filters import EpisodeFilter
from .lexical import LexicalQuery, document_text, reads_as_spanish
from .models import Episode
from .scopes import ScopeKeys
from .validation import (
    EPISODE_ID_IN_TEXT,
    MAX_QUERY_CHARS,
    MAX_SENDER_CHARS,
    text,
    validate_statuses,
    validate_top_k,
)

KEPT, BELOW_FLOOR, CUT_BY_TOP_K = "kept", "below_floor", "cut_by_top_k"
DUPLICATE = "duplicate"  # in a prompt (`distinct`), the same text as a memory kept above it: one copy is enough
# A question about a speaker (first person by them, or naming them) takes their own episodes down to
# this share of the floor (0.25 of 0.30): on bench/recall_quality.py a floor of 0.25 still injects
# nothing for irrelevant questions, and "What is my job?" then finds the asker's "I work as a pilot"
# (relevance 0.27) instead of only another speaker's job (docs/benchmarks.md, round 9).
ABOUT_FLOOR = 5 / 6
# A speaker with at most this many episodes passing the filters is searched exactly: reading their
# vectors by id costs ~25 µs each, and Chroma's HNSW search filtered by sender_id 20-60 ms in a
# 30,000-episode scope (bench/recall_quality.py, docs/benchmarks.md); it is exact, too.
EXACT_SPEAKER = 400
SPEAKER_STAGE, SCOPE_STAGE, LEXICAL_STAGE, ID_STAGE = "speaker", "scope", "lexical", "episode_id"
NAMED_STAGE = "named_speaker"  # the episodes of a speaker the question names, searched first too


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
            "kind": e.kind,
            "metadata": e.metadata,
        }


@dataclass
class Candidate:
    """One episode retrieval considered: where it came from, its breakdown, and what became of it."""

    hit: RecallHit
    stages: list[str]
    outcome: str = KEPT

    def as_dict(self) -> dict[str, Any]:
        """The snapshot's record of it: ids and scores, no content (the console reads the episode)."""
        e = self.hit.episode
        return {
            "episode_id": e.episode_id,
            "sender_id": e.sender_id,
            "score": round(self.hit.score, 6),
            "breakdown": self.hit.breakdown.as_dict(),
            "stages": self.stages,
            "outcome": self.outcome,
        }


@dataclass
class Retrieval:
    query: str
    speaker_id: str
    floor: float
    top_k: int
    hits: list[RecallHit] = field(default_factory=list)
    candidates: list[Candidate] = field(default_factory=list)
    named: list[str] = field(default_factory=list)  # sender ids the question names (ranking.named_speakers)

    def explanation(self) -> dict[str, Any]:
        """What an injection snapshot keeps of this retrieval (issue 18's "whole decision")."""
        return {
            "query": self.query,
            "speaker_id": self.speaker_id,
            "floor": self.floor,
            "top_k": self.top_k,
            "first_person": bool(self.speaker_id) and ranking.is_first_person(self.query),
            "named_speakers": self.named,
            "candidates": [c.as_dict() for c in self.candidates],
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
    kind: Any = None,
    speaker_id: Any = None,
    current_speaker_id: str | None = None,
    actor: Actor | None = None,
) -> list[RecallHit]:
    """Hybrid search within the scope, ranked by docs/design.md §4, each hit with its breakdown.

    `sender_id` is a filter (only that sender's episodes); `speaker_id` names the current speaker,
    whose own episodes are searched first and weighted ×1.12 (`current_speaker_id` is its older
    name). `tags` keeps episodes carrying any of the tags, `kind` those of that kind;
    `statuses=None` (or []) searches active episodes. Episodes below the relevance floor
    (MEMCONSOLE_RECALL_MIN_SIMILARITY) are not returned. A query that is exactly an episode id of
    the scope returns that episode first. Reads are not audited. Raises `Unavailable` when the index
    or the model fails.
    """
    return retrieve(
        keys,
        query,
        top_k=top_k,
        importance_min=importance_min,
        sender_id=sender_id,
        time_after=time_after,
        time_before=time_before,
        tags=tags,
        statuses=statuses,
        kind=kind,
        speaker_id=speaker_id or current_speaker_id,
        actor=actor,
    ).hits


@metrics.timed("recall")  # recall, inject and replay: every retrieval is counted
def retrieve(
    keys: ScopeKeys,
    query: Any,
    *,
    top_k: Any = 5,
    speaker_id: Any = None,
    actor: Actor | None = None,
    min_similarity: float | None = None,
    distinct: bool = False,
    **filters: Any,
) -> Retrieval:
    """`recall`, keeping every candidate considered and why each was kept or dropped; `distinct`
    (a prompt's: inject and its replay) keeps one memory of a text (the others are DUPLICATE)."""
    if actor is not None:
        actor.require_bot(keys)
    query = text(query, "query", MAX_QUERY_CHARS, required=True)
    top_k = validate_top_k(top_k)
    speaker = text(speaker_id, "speaker_id", MAX_SENDER_CHARS) if speaker_id else ""
    filters["statuses"] = validate_statuses(filters.get("statuses"))
    found = EpisodeFilter.build(keys, **filters)
    floor = settings.MEMCONSOLE_RECALL_MIN_SIMILARITY if min_similarity is None else min_similarity
    result = Retrieval(query, speaker, floor, top_k)
    with unavailable_on_failure():
        pool = _Pool.gather(keys, query, top_k, found, speaker)
        result.candidates = pool.ranked(query, speaker, floor, top_k, distinct)
        result.named = pool.named
    result.hits = [c.hit for c in result.candidates if c.outcome == KEPT]
    prefetch_metadata([hit.episode for hit in result.hits])  # as_dict reads each one's metadata
    return result


@dataclass
class _Pool:
    """The candidates of one query: rows, their vector similarities, lexical query and stages."""

    rows: dict[str, Episode]
    similarities: dict[str, float]
    stages: dict[str, list[str]]
    lexical: LexicalQuery
    vectors: bool
    vector_weight: float = ranking.VECTOR_WEIGHT  # the query's (ranking.vector_weight)
    english_only: bool = False  # the query's model reads English only
    named: list[str] = field(default_factory=list)

    @classmethod
    def gather(cls, keys: ScopeKeys, query: str, top_k: int, found: EpisodeFilter, speaker: str) -> _Pool:
        embedder = embeddings.get_embedder()
        use_vectors = not embedder.is_fallback  # without a model, the lexical index is the search
        pool = cls({}, {}, {}, LexicalQuery.build(keys.user_key, query), use_vectors)
        episodes = found.episodes()
        # A speaker the question names (by their sender_name) is searched first like the asker.
        named = ranking.named_speakers(query, people.known_speakers(keys), exclude=speaker)
        pool.named = [i for i in named if found.sender_id in ("", i)]
        vector, model_id = None, ""
        if use_vectors:
            # During a model switch, the model the scope's index still holds (reembed.py).
            model_id, vector = reembed.query_vector(keys.user_key, query)
            spec = embeddings.spec_for_model_id(model_id)
            pool.english_only = english_only = bool(spec and spec.english_only)
            spanish = english_only and reads_as_spanish(query)
            pool.vector_weight = ranking.vector_weight(query, english_only=english_only, spanish=spanish)
            if speaker and found.sender_id in ("", speaker):
                pool._vector_stage(keys, model_id, vector, found, top_k, max(20, top_k * 4), speaker)
            for sender_id in pool.named:
                pool._vector_stage(keys, model_id, vector, found, top_k, max(20, top_k * 4), sender_id, NAMED_STAGE)
            pool._vector_stage(keys, model_id, vector, found, top_k, max(50, top_k * 5), None)
        # The lexical stages: the speaker's own episodes, then the scope's.
        fetch = max(10, top_k * 3)
        lexical_pks: dict[int, str] = {}
        if speaker and found.sender_id in ("", speaker):
            lexical_pks.update(dict.fromkeys(pool.lexical.candidates(fetch, sender_id=speaker), SPEAKER_STAGE))
        for sender_id in pool.named:
            for pk in pool.lexical.candidates(fetch, sender_id=sender_id):
                lexical_pks.setdefault(pk, SPEAKER_STAGE)
        for pk in pool.lexical.candidates(fetch):
            lexical_pks.setdefault(pk, LEXICAL_STAGE)
        known = {row.pk for row in pool.rows.values()}
        new = [pk for pk in lexical_pks if pk not in known]
        if new:
            pool._add(episodes.filter(pk__in=new), "")
        for row in pool.rows.values():
            stage = lexical_pks.get(row.pk)
            if stage is not None:
                pool._stage(row.episode_id, LEXICAL_STAGE if stage == LEXICAL_STAGE else "speaker_lexical")
        # An episode id named in the query is found even when neither index finds it.
        for token in set(EPISODE_ID_IN_TEXT.findall(query.lower())) - set(pool.rows):
            pool._add(episodes.filter(episode_id=token), ID_STAGE)
        if vector is not None:
            pool._similarities_for_lexical_only(keys, model_id, vector)
        return pool

    def _vector_stage(
        self,
        keys: ScopeKeys,
        model_id: str,
        vector: np.ndarray,
        found: EpisodeFilter,
        top_k: int,
        fetch: int,
        speaker: str | None,
        stage: str = "",
    ) -> None:
        """The nearest vectors (the speaker's own when `speaker`), their rows passing the filter.

        Over-fetch so that re-ranking by recency and weights can lift a less similar episode. When
        the filters are so narrow that the nearest 1,000 hold too few matches, the index filters too.
        """
        stage = stage or (SPEAKER_STAGE if speaker else SCOPE_STAGE)
        base = found.index_where()
        episodes = found.episodes()
        own: list[str] | None = None  # the speaker's episode ids, when few enough to search exactly
        if speaker:
            clause = {"sender_id": speaker}
            passes: list[tuple[int, dict[str, Any] | None]] = [
                (fetch, {"$and": [*base["$and"], clause]} if base else clause)
            ]
            ids = list(episodes.filter(sender_id=speaker).values_list("episode_id", flat=True)[: EXACT_SPEAKER + 1])
            own = ids if len(ids) <= EXACT_SPEAKER else None
        else:
            passes = [(fetch, None), (1000, None)]
            if base:
                passes.append((fetch, base))
        # Read-your-writes: the scope's episodes not indexed yet, searched exactly (memory/pending.py).
        waiting = pending.nearest(
            keys.user_key, model_id, vector, episodes.filter(sender_id=speaker) if speaker else episodes
        )
        self.similarities.update({h.episode_id: h.similarity for h in waiting if h.episode_id not in self.similarities})
        for size, where in passes:
            if own is not None:  # exact, over the rows that pass the filters in SQL
                indexed = vectors.nearest_among(keys.user_key, model_id, vector, own, size)
            else:
                indexed = vectors.query(keys.user_key, model_id, vector, size, where=where)
            hits = pending.merge(indexed, waiting, size)
            # The collection is the scope's own (vectors.query checks its owner); rows are
            # re-filtered by user_key in SQL, so no hit of another scope can surface.
            similarities = {h.episode_id: h.similarity for h in hits}
            for episode_id, similarity in similarities.items():
                self.similarities.setdefault(episode_id, similarity)
            new = [i for i in similarities if i not in self.rows]
            self._add(episodes.with_ids(new) if new else [], "")
            matched = [i for i in similarities if i in self.rows]
            for episode_id in matched:
                self._stage(episode_id, stage)
            if len(matched) >= top_k or (len(hits) < size and where is None):
                break

    def _stage(self, episode_id: str, stage: str) -> None:
        stages = self.stages.setdefault(episode_id, [])
        if stage not in stages:
            stages.append(stage)

    def _add(self, rows: Any, stage: str) -> None:
        for row in rows:
            self.rows[row.episode_id] = row
            if stage:
                self._stage(row.episode_id, stage)

    def _similarities_for_lexical_only(self, keys: ScopeKeys, model_id: str, vector: np.ndarray) -> None:
        """The vector similarity of candidates found only lexically (0 for one with no vector), read
        from the collection holding the query's model (its cached handle: no lookup per recall)."""
        missing = [i for i in self.rows if i not in self.similarities]
        if not missing:
            return
        found = vectors.nearest_among(keys.user_key, model_id, vector, missing, len(missing))
        similarities = {hit.episode_id: hit.similarity for hit in found}
        for episode_id in missing:
            self.similarities[episode_id] = similarities.get(episode_id, 0.0)

    def _vector_weight(self, content: str) -> float:
        """The query's vector weight, lowered for a memory an English-only model cannot read."""
        if not self.english_only or self.vector_weight == ranking.VECTOR_WEIGHT_UNREAD:
            return self.vector_weight  # read the memory's language only when it can matter
        unread = ranking.mostly_cjk(content) or reads_as_spanish(content)
        return ranking.memory_vector_weight(self.vector_weight, english_only=True, unread=unread)

    def ranked(self, query: str, speaker: str, floor: float, top_k: int, distinct: bool = False) -> list[Candidate]:
        """Every candidate, best first, each marked kept, below_floor or cut_by_top_k."""
        now = timezone.now()
        half_life = settings.MEMCONSOLE_RECENCY_HALF_LIFE_DAYS
        candidates = []
        for row in self.rows.values():
            content = row.content
            exact = ranking.exact_score(query, row.episode_id, row.sender_id, row.sender_name, row.tags, content)
            parts = ranking.breakdown(
                similarity=self.similarities.get(row.episode_id, 0.0),
                timestamp=row.timestamp,
                importance=row.importance,
                episode_sender_id=row.sender_id,
                # A speaker the question names is weighted as the current speaker is (×1.12).
                current_speaker_id=row.sender_id if row.sender_id in self.named else speaker or None,
                tags=row.tags,
                exact=exact,
                now=now,
                half_life_days=half_life,
                lexical=self.lexical.score(document_text(row, content)),
                vectors=self.vectors,
                vector_weight=self._vector_weight(content),
            )
            candidates.append(Candidate(RecallHit(row, parts.score, parts), self.stages.get(row.episode_id, [])))
        # A query that is an episode's id asks for that episode: it comes first, whatever its age or
        # score. A first-person question of the current speaker is about them: their own episodes
        # above the floor come next (speaker-first), the one that answers it best first (by the
        # score without recency: which of my memories is about my job is not a matter of age), then
        # everything else by score. A question naming a speaker is about them the same way.
        # Their own episodes are held to ABOUT_FLOOR of the floor: the question is about them.
        about = {*self.named, *([speaker] if speaker and ranking.is_first_person(query) else [])}

        def passes(c: Candidate) -> bool:
            return c.hit.breakdown.fused >= (floor * ABOUT_FLOOR if c.hit.episode.sender_id in about else floor)

        def order(c: Candidate) -> tuple[bool, bool, float, float, int]:
            e, parts = c.hit.episode, c.hit.breakdown
            own = e.sender_id in about and passes(c)
            return ranking.is_exact_id_query(query, e.episode_id), own, parts.topical if own else 0.0, c.hit.score, e.id

        candidates.sort(key=order, reverse=True)
        kept, texts = 0, set()  # (distinct) the texts kept so far: a prompt gets a fact remembered twice once
        for candidate in candidates:
            exact_id = ranking.is_exact_id_query(query, candidate.hit.episode.episode_id)
            same_text = " ".join(candidate.hit.episode.content.casefold().split()) if distinct else ""
            if not passes(candidate) and not exact_id:
                candidate.outcome = BELOW_FLOOR
            elif distinct and same_text in texts and not exact_id:
                candidate.outcome = DUPLICATE
            elif kept >= top_k:
                candidate.outcome = CUT_BY_TOP_K
            else:
                kept += 1
                texts.add(same_text)
        return candidates
