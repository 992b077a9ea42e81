"""How recall reaches its candidates (issue 16): a speaker's own episodes are searched exactly, by what
the database says they wrote, through `vectors.nearest_among` (a speaker with more episodes than
`retrieval.EXACT_SPEAKER` through the index's filtered search), and an episode found only lexically
gets its stored vector's similarity."""

from __future__ import annotations

import numpy as np
import pytest

from memconsole.lib import embeddings, vectors
from memconsole.memory import episodes, retrieval
from memconsole.memory.models import Episode

pytestmark = pytest.mark.django_db

# Other people's food memories, each nearer to "what food do I like?" than the asker's own.
CROWD = [
    f"{name} likes {food} food a lot"
    for name in ("Ana", "Ben", "Cal", "Dee", "Eli", "Fay")
    for food in (
        "Thai",
        "Greek",
        "Italian",
        "Mexican",
        "Indian",
        "Korean",
        "French",
        "Turkish",
        "Spanish",
        "Lebanese",
    )
]
QUESTION = "what food do I like?"


def _model_id() -> str:
    return embeddings.get_embedder().model_id


def test_nearest_among_ranks_only_the_given_ids_by_their_exact_similarity(keys, system):
    made = [
        episodes.remember(keys, system, text, sender_id="u1").episode
        for text in ("I like ramen", "The train leaves at nine", "Pasta is my favourite dish", "It rained all day")
    ]
    vector = embeddings.embed_query([QUESTION])[0]
    wanted = [made[0].episode_id, made[1].episode_id, made[2].episode_id, "notanepisode"]

    hits = vectors.nearest_among(keys.user_key, _model_id(), vector, wanted, 2)

    stored = vectors.get(keys.user_key, [e.episode_id for e in made[:3]], include_embeddings=True)
    exact = {i: float(np.dot(v["embedding"], vector) / np.linalg.norm(v["embedding"])) for i, v in stored.items()}
    best_two = sorted(exact, key=exact.__getitem__, reverse=True)[:2]
    assert [hit.episode_id for hit in hits] == best_two  # the fourth episode and the unknown id are not asked for
    assert [hit.similarity for hit in hits] == pytest.approx([exact[i] for i in best_two], abs=1e-5)
    assert vectors.nearest_among(keys.user_key, _model_id(), vector, [], 2) == []


@pytest.mark.parametrize(
    "answer",
    [
        {"ids": ["a", "b"], "embeddings": []},  # ids listed before their vectors are written
        {"ids": ["a", "b"], "embeddings": None},
        {"ids": ["a", "b"], "embeddings": np.ones((1, 3), dtype=np.float32)},
        {"ids": [], "embeddings": []},
    ],
    ids=["no-vectors", "none", "fewer-vectors", "no-ids"],
)
def test_an_answer_without_one_vector_per_id_is_searched_by_the_index_alone(answer):
    """Seen in a test run under load: recall crashed with "axis 1 is out of bounds" when embedded
    Chroma listed a speaker's ids while the write-behind indexer was still writing their vectors."""
    assert vectors.read_vectors(answer) is None


def test_a_whole_answer_gives_one_row_per_id():
    matrix = vectors.read_vectors({"ids": ["a", "b"], "embeddings": [[1, 0, 0], [0, 1, 0]]})
    assert matrix is not None and matrix.shape == (2, 3)


def test_nearest_among_never_reads_another_scopes_vectors(keys, other_keys, system):
    theirs = episodes.remember(other_keys, system, "I like ramen", sender_id="u1").episode
    episodes.remember(keys, system, "I like soup", sender_id="u1")
    vector = embeddings.embed_query([QUESTION])[0]

    assert vectors.nearest_among(keys.user_key, _model_id(), vector, [theirs.episode_id], 5) == []


@pytest.fixture
def crowded(keys, system):
    """60 food memories of other people, then the asker's own, further from the question."""
    for text in CROWD:
        episodes.remember(keys, system, text, sender_id="crowd", sender_name="Crowd")
    return episodes.remember(keys, system, "Sushi on Sundays, always", sender_id="old", sender_name="Old").episode


def test_a_speaker_is_searched_by_what_the_database_says_they_wrote(keys, crowded, settings):
    """The speaker stage reads the speaker's episodes from the database: an episode whose index
    metadata still names someone else (written around it, or not yet caught up) is still theirs.
    The scope-wide stage cannot find it here: 60 other memories are nearer."""
    settings.MEMCONSOLE_RECALL_MIN_SIMILARITY = 0.0
    Episode.objects.filter(pk=crowded.pk).update(sender_id="new", sender_name="New")
    assert crowded.episode_id not in {h.episode.episode_id for h in retrieval.recall(keys, QUESTION, top_k=50)}

    found = retrieval.retrieve(keys, QUESTION, top_k=3, speaker_id="new")

    assert found.hits[0].episode.episode_id == crowded.episode_id
    first = next(c for c in found.candidates if c.hit.episode.episode_id == crowded.episode_id)
    assert "speaker" in first.stages


def test_a_speaker_with_more_episodes_than_the_exact_limit_is_searched_through_the_index(
    keys, system, crowded, settings, monkeypatch
):
    settings.MEMCONSOLE_RECALL_MIN_SIMILARITY = 0.0
    episodes.remember(keys, system, "I go swimming on Mondays", sender_id="old", sender_name="Old")
    monkeypatch.setattr(retrieval, "EXACT_SPEAKER", 1)  # two episodes of "old": the filtered index search
    searched: list[dict | None] = []
    real_query = vectors.query

    def watched(user_key, model_id, vector, n_results, where=None, include_metadata=False):
        searched.append(where)
        return real_query(user_key, model_id, vector, n_results, where, include_metadata)

    monkeypatch.setattr(vectors, "query", watched)

    found = retrieval.retrieve(keys, QUESTION, top_k=3, speaker_id="old")

    assert found.hits[0].episode.episode_id == crowded.episode_id
    assert any(where and "old" in str(where) for where in searched)


def test_an_episode_found_only_lexically_gets_its_stored_vectors_similarity(keys, system, settings):
    settings.MEMCONSOLE_RECALL_MIN_SIMILARITY = 0.0
    for text in CROWD:  # nearer in meaning, so the vector stages fill up without it
        episodes.remember(keys, system, text, sender_id="crowd")
    odd = episodes.remember(keys, system, "Ana paid the qwzx invoice", sender_id="u1").episode
    vector = embeddings.embed_query(["Ana likes Thai food a lot, qwzx"])[0]
    stored = vectors.get(keys.user_key, [odd.episode_id], include_embeddings=True)[odd.episode_id]["embedding"]

    found = retrieval.retrieve(keys, "Ana likes Thai food a lot, qwzx", top_k=3)

    candidate = next(c for c in found.candidates if c.hit.episode.episode_id == odd.episode_id)
    assert candidate.stages == ["lexical"]  # not among the nearest vectors
    assert float(np.dot(stored, vector)) > 0.05
    assert candidate.hit.breakdown.similarity == pytest.approx(float(np.dot(stored, vector)), abs=1e-4)
