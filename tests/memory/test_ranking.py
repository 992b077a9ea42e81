"""Recall ranking (docs/design.md §4): each factor against hand-computed values, then end to end."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from memconsole.lib import embeddings
from memconsole.memory import episodes, models, ranking, retrieval
from memconsole.memory.models import Episode

NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)


def _parts(**overrides):
    values = {
        "similarity": 0.5,
        "timestamp": NOW,
        "importance": 2,
        "episode_sender_id": "u1",
        "current_speaker_id": None,
        "tags": [],
        "exact": 0.0,
        "now": NOW,
        "half_life_days": 30,
    }
    values.update(overrides)
    return ranking.breakdown(**values)


# --- recency ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("age_days", "half_life", "expected"),
    [
        (0, 30, 1.0),
        (30, 30, 0.5),
        (60, 30, 0.25),
        (90, 30, 0.125),
        (15, 30, 1 / math.sqrt(2)),
        (1, 30, 2 ** (-1 / 30)),
        (10, 10, 0.5),
        (30, 10, 0.125),
        (365, 30, 2 ** (-365 / 30)),
    ],
)
def test_it_halves_recency_every_half_life(age_days, half_life, expected):
    assert ranking.recency(NOW - timedelta(days=age_days), NOW, half_life) == pytest.approx(expected, rel=1e-12)


def test_it_counts_hours_as_fractions_of_a_day():
    assert ranking.recency(NOW - timedelta(hours=36), NOW, 30) == pytest.approx(2 ** (-1.5 / 30), rel=1e-12)


def test_it_gives_a_missing_timestamp_one_half():
    assert ranking.recency(None, NOW, 30) == 0.5
    parts = _parts(similarity=0.8, timestamp=None)
    assert parts.recency == 0.5
    assert parts.score == pytest.approx(0.4)


def test_it_does_not_reward_a_timestamp_in_the_future():
    assert ranking.recency(NOW + timedelta(days=10), NOW, 30) == 1.0


def test_it_multiplies_similarity_by_recency():
    parts = _parts(similarity=0.8, timestamp=NOW - timedelta(days=30))
    assert parts.score == pytest.approx(0.4, rel=1e-12)


# --- weights ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("importance", "weight"), [(1, 0.9), (2, 1.0), (3, 1.08), (4, 1.16), (5, 1.24)])
def test_it_weights_each_importance(importance, weight):
    parts = _parts(similarity=0.5, importance=importance)
    assert parts.importance == weight
    assert parts.score == pytest.approx(0.5 * weight, rel=1e-12)


def test_it_weights_the_current_speaker_1_12():
    assert _parts(current_speaker_id="u1").speaker == 1.12
    assert _parts(current_speaker_id="u1").score == pytest.approx(0.5 * 1.12)
    assert _parts(current_speaker_id="u2").speaker == 1.0
    assert _parts(current_speaker_id=None).speaker == 1.0
    # an episode with no sender is not "by" a speaker who has no id either
    assert _parts(episode_sender_id="", current_speaker_id="").speaker == 1.0


@pytest.mark.parametrize("tag", ["correction", "clarification", "profile-update", "preference-change", "fact-update"])
def test_it_weights_each_update_tag_1_08(tag):
    parts = _parts(tags=["misc", tag])
    assert parts.update == 1.08
    assert parts.score == pytest.approx(0.5 * 1.08)


def test_it_does_not_weight_other_tags():
    assert _parts(tags=["travel", "food", "updates", "corrections"]).update == 1.0
    assert _parts(tags=["correction", "fact-update"]).update == 1.08  # once, however many


# --- exact boost -----------------------------------------------------------------------------------

EP = {
    "episode_id": "a1b2c3d4e5f6",
    "sender_id": "u42",
    "sender_name": "Alice",
    "tags": ["travel"],
    "content": "A trip to Beijing next month",
}


def _exact(query, **overrides):
    fields = dict(EP, **overrides)
    return ranking.exact_score(
        query, fields["episode_id"], fields["sender_id"], fields["sender_name"], fields["tags"], fields["content"]
    )


@pytest.mark.parametrize(
    ("query", "exact"),
    [
        ("what about a1b2c3d4e5f6?", 2.0),  # id
        ("what did u42 say", 1.2),  # sender id
        ("what did alice say", 1.2),  # sender name, case-insensitive
        ("any travel memories", 1.2),  # tag
        ("beijing next", 0.6),  # content substring
        ("TRIP TO", 0.6),
        ("Alice travel", 1.2),  # sender and tag count once together
        ("a1b2c3d4e5f6 alice", 3.2),
        ("trip to beijing next month", 0.6),
        ("something else entirely", 0.0),
        ("", 0.0),
        ("a", 0.0),  # a one-letter query is no content match
        ("alicent", 0.0),  # a sender name must match as a word
    ],
)
def test_it_scores_exact_matches(query, exact):
    assert _exact(query) == pytest.approx(exact)


def test_it_scores_id_sender_and_content_together():
    assert _exact("a1b2c3d4e5f6 alice", content="a1b2c3d4e5f6 alice was here") == pytest.approx(3.8)


@pytest.mark.parametrize(
    ("exact", "boost"), [(0.0, 1.0), (0.6, 1.15), (1.2, 1.3), (1.8, 1.45), (2.0, 1.5), (3.2, 1.5), (3.8, 1.5)]
)
def test_it_boosts_exact_matches_up_to_the_cap(exact, boost):
    assert ranking.exact_boost(exact) == pytest.approx(boost)
    assert _parts(exact=exact).exact == pytest.approx(boost)


# --- the product, clamped ----------------------------------------------------------------------------


def test_it_multiplies_every_factor():
    parts = _parts(
        similarity=0.6,
        timestamp=NOW - timedelta(days=30),
        importance=4,
        current_speaker_id="u1",
        tags=["fact-update"],
        exact=1.2,
    )
    expected = 0.6 * 0.5 * 1.16 * 1.12 * 1.08 * 1.3
    assert parts.score == pytest.approx(expected, rel=1e-12)
    assert parts.as_dict() == {
        "similarity": 0.6,
        "recency": 0.5,
        "importance": 1.16,
        "speaker": 1.12,
        "update": 1.08,
        "exact": 1.3,
        "lexical": 0.0,  # no lexical signal given: relevance is the similarity
        "relevance": 0.6,
    }


def _score_factors(breakdown: dict[str, float]) -> float:
    """The product the score is (issue 16): relevance (which fuses similarity and lexical) × weights."""
    return math.prod(value for key, value in breakdown.items() if key not in {"similarity", "lexical"})


def test_it_clamps_the_score_to_one():
    parts = _parts(similarity=0.95, importance=5, current_speaker_id="u1", tags=["correction"], exact=2.0)
    assert 0.95 * 1.24 * 1.12 * 1.08 * 1.5 > 1
    assert parts.score == 1.0


def test_it_clamps_similarity_to_zero_and_one():
    assert _parts(similarity=-0.2).similarity == 0.0
    assert _parts(similarity=-0.2).score == 0.0
    assert _parts(similarity=1.0000002).similarity == 1.0


# --- end to end, with the real model ------------------------------------------------------------------


def _cosine(a: str, b: str) -> float:
    vectors = embeddings.embed([a, b])
    return float(np.dot(vectors[0], vectors[1]))


def test_it_reports_a_breakdown_whose_product_is_the_score(db, keys, system):
    thirty_days_ago = datetime.now(UTC) - timedelta(days=30)
    content = "Bob prefers window seats on long flights"
    made = episodes.remember(
        keys,
        system,
        content,
        tags=["preference-change"],
        importance=4,
        sender_id="u2",
        sender_name="Bob",
        timestamp=thirty_days_ago,
    ).episode
    episodes.remember(keys, system, "The office closes early on Fridays", sender_id="u1", timestamp=thirty_days_ago)
    query = "where does bob like to sit on a plane"

    hits = retrieval.recall(keys, query, top_k=2, current_speaker_id="u2")

    assert hits[0].episode.episode_id == made.episode_id
    parts = hits[0].breakdown
    assert parts.similarity == pytest.approx(_cosine(query, content), abs=1e-4)
    assert parts.recency == pytest.approx(0.5, abs=1e-5)  # the seconds the test takes age it a little
    assert (parts.importance, parts.speaker, parts.update, parts.exact) == (
        1.16,
        1.12,
        1.08,
        1.3,
    )  # "bob" = sender name
    product = _score_factors(hits[0].as_dict()["breakdown"])
    assert hits[0].score == pytest.approx(product, abs=1e-5)
    relevance = 0.7 * parts.similarity + 0.3 * parts.lexical
    assert parts.relevance == pytest.approx(relevance, abs=1e-6)
    assert hits[0].score == pytest.approx(relevance * 0.5 * 1.16 * 1.12 * 1.08 * 1.3, abs=1e-5)
    assert hits[0].as_dict()["score"] == pytest.approx(hits[0].score, abs=1e-6)
    for hit in hits:
        assert hit.score == pytest.approx(min(1.0, _score_factors(hit.as_dict()["breakdown"])), abs=1e-5)


def test_it_ranks_an_episode_without_timestamp_at_half_recency(db, keys, system):
    made = episodes.remember(keys, system, "The spare key is under the blue flower pot").episode
    Episode.objects.filter(pk=made.pk).update(timestamp=None)

    hit = retrieval.recall(keys, "where is the spare key")[0]

    assert hit.breakdown.recency == 0.5
    assert hit.score == pytest.approx(hit.breakdown.fused * 0.5, abs=1e-6)


def test_it_lets_recency_and_importance_reorder_equally_similar_episodes(db, keys, system):
    old = episodes.remember(
        keys, system, "We adopted a puppy", timestamp=datetime.now(UTC) - timedelta(days=90)
    ).episode
    new = episodes.remember(keys, system, "We adopted a puppy", sender_id="u9").episode
    important_old = episodes.remember(
        keys, system, "We adopted a puppy", importance=5, timestamp=datetime.now(UTC) - timedelta(days=90)
    ).episode

    order = [hit.episode.episode_id for hit in retrieval.recall(keys, "puppy adoption", top_k=3)]

    assert order == [new.episode_id, important_old.episode_id, old.episode_id]


def test_it_clamps_a_boosted_recall_score_to_one(db, keys, system):
    made = episodes.remember(
        keys, system, "Carol loves hiking", tags=["correction"], importance=5, sender_id="carol"
    ).episode
    hit = retrieval.recall(keys, f"Carol loves hiking {made.episode_id}", current_speaker_id="carol")[0]
    assert hit.episode.episode_id == made.episode_id
    assert hit.breakdown.exact == 1.5
    assert _score_factors(hit.as_dict()["breakdown"]) > 1
    assert hit.score == 1.0


def test_it_finds_an_episode_named_by_id_beyond_the_nearest_vectors_with_its_real_similarity(
    db, keys, system, monkeypatch, settings
):
    target_text = "Dinner reservation at eight on Saturday"
    others = [f"Lunch with the team on day {number} of the sprint" for number in range(55)]
    # The id is part of the query, so it moves the query's vector: fix it so that the setup below
    # (target outside the nearest 50, but within reach of the id boost) holds on every run.
    with monkeypatch.context() as patch:
        patch.setattr(models, "new_episode_id", lambda: "5a1e0c3f9b2d")
        target = episodes.remember(keys, system, target_text).episode
    for text in others:
        episodes.remember(keys, system, text)
    query = f"lunch plans {target.episode_id}"
    vectors_ = embeddings.embed([query, target_text, *others])
    similarity = float(vectors_[1] @ vectors_[0])
    others_similarity = sorted((vectors_[2:] @ vectors_[0]).tolist(), reverse=True)
    assert similarity < others_similarity[49]  # not among the 50 nearest vectors recall fetches for top_k=10
    assert similarity * 1.5 > others_similarity[0]  # but the id boost lifts it to the top

    # Hybrid recall (issue 16): the others share the word "lunch" with the query, so their lexical
    # part outranks the id boost now; the episode named by id is still found, with its real
    # similarity and the boost (floor off: its relevance is its vector similarity alone).
    settings.MEMCONSOLE_RECALL_MIN_SIMILARITY = 0.0
    hits = {hit.episode.episode_id: hit for hit in retrieval.recall(keys, query, top_k=50)}

    assert target.episode_id in hits
    assert hits[target.episode_id].breakdown.similarity == pytest.approx(similarity, abs=1e-4)
    assert hits[target.episode_id].breakdown.exact == 1.5
