"""Recall quality rules of issue 16 beyond the plumbing (tests/memory/test_recall_hybrid.py): who a
question is about in English, Spanish and Chinese, which of the asker's memories answers it, how much
the vector similarity counts for a query the model cannot read, and the shipped floor."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from memconsole.lib import embeddings
from memconsole.memory import episodes, injection, lexical, ranking, retrieval

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "query",
    [
        "What is my job?",
        "what food do I like?",
        "¿Cuál es mi profesión?",
        "¿qué como yo?",
        "¿En qué trabajo?",  # Spanish drops the pronoun: the verb says who
        "¿A dónde voy en verano?",
        "¿Dónde estoy?",
        "我下周去哪里出差?",
        "私の仕事は何ですか",
    ],
)
def test_it_reads_first_person_questions_in_three_languages(query):
    assert ranking.is_first_person(query)


@pytest.mark.parametrize(
    "query",
    [
        "What does Sam do for work?",
        "¿Dónde trabaja Lucía?",
        "¿Qué comida le gusta a Mateo?",
        "¿Cuál es la capital de Australia?",
        "¿Qué tiempo hace?",
        "¿Cómo se calcula la derivada de un logaritmo?",
        "李娜是做什么工作的?",
        "¿Qué trabajo tiene Mateo?",  # a noun in -o, then the verb and its subject
        "¿Qué libro lee Ana?",
        "¿Qué plato prefiere Lucía?",
        "¿Cuánto dinero gana Bob?",
        "¿Qué tipo de música escucha Sam?",
        "¿Qué regalo compró Bob?",
    ],
)
def test_it_does_not_take_third_person_questions_for_first_person(query):
    assert not ranking.is_first_person(query)


def test_the_vector_weight_drops_for_a_cjk_query_only_with_an_english_only_model():
    assert embeddings.REGISTRY[embeddings.DEFAULT_MODEL].english_only
    assert not any(spec.english_only for name, spec in embeddings.REGISTRY.items() if name != embeddings.DEFAULT_MODEL)
    assert ranking.vector_weight("我下周去哪里出差?", english_only=True) == pytest.approx(0.3)
    assert ranking.vector_weight("東京へ行きます", english_only=True) == pytest.approx(0.3)
    assert ranking.vector_weight("Where is my next business trip?", english_only=True) == pytest.approx(0.7)
    assert ranking.vector_weight("¿A dónde viajo?", english_only=True) == pytest.approx(0.7)
    assert ranking.vector_weight("我下周去哪里出差?", english_only=False) == pytest.approx(0.7)


def test_a_first_person_question_gets_the_askers_answering_memory_first_however_old(keys, system):
    now = timezone.now()
    job = episodes.remember(
        keys, system, "I work as a nurse at the city hospital", sender_id="sam", timestamp=now - timedelta(days=60)
    ).episode
    episodes.remember(keys, system, "My favourite food is ramen, I eat it every Friday", sender_id="sam", timestamp=now)
    episodes.remember(keys, system, "Bob works as an accountant", sender_id="bob", timestamp=now)

    hits = retrieval.recall(keys, "What is my job?", top_k=3, speaker_id="sam")

    # By score the fresh ramen memory would come first (recency halves every 30 days); the question
    # is about Sam's job, so the most relevant of Sam's own memories answers it.
    assert hits[0].episode.episode_id == job.episode_id
    assert hits[0].breakdown.recency < hits[1].breakdown.recency


def test_a_spanish_question_without_a_pronoun_is_answered_from_the_askers_memories(keys, system):
    now = timezone.now()
    job = episodes.remember(
        keys, system, "Trabajo como abogada en Madrid", sender_id="lucia", timestamp=now - timedelta(days=40)
    ).episode
    episodes.remember(keys, system, "Trabajo como profesor de guitarra", sender_id="mateo", timestamp=now)

    made = injection.record_injection(keys, system, "¿En qué trabajo?", sender_id="lucia", top_k=2)

    assert made.hits[0].episode.episode_id == job.episode_id
    assert made.snapshot.payload["retrieval"]["first_person"] is True


def test_a_chinese_first_person_question_returns_the_askers_memory_first(keys, system):
    now = timezone.now()
    for sender, content, days in [
        ("lina", "今年国庆节我打算去云南旅游", 50),
        ("lina", "我爱吃饺子，尤其是猪肉白菜馅的", 0),
        ("wang", "国庆节我要去北京看升旗", 0),
        ("wang", "我每天早上都要喝一杯咖啡", 0),
    ]:
        episodes.remember(keys, system, content, sender_id=sender, timestamp=now - timedelta(days=days))

    made = injection.record_injection(keys, system, "我国庆节去哪里玩?", sender_id="lina", top_k=3)

    assert made.hits[0].episode.content == "今年国庆节我打算去云南旅游"


def test_an_irrelevant_chinese_question_injects_nothing_with_the_shipped_floor(keys, system, shipped_floor):
    # The English-only model rates these Chinese sentences ~0.5-0.6 alike: with its similarity at
    # 0.7 they would pass the floor; sharing no word with the question, none does.
    for content in ["我下周三要去成都出差", "我在一家银行做软件工程师", "下个月我要去东京看樱花"]:
        episodes.remember(keys, system, content, sender_id="xu")

    made = injection.record_injection(keys, system, "如何给自行车轮胎打气?", sender_id="xu", top_k=3)

    assert made.hits == [] and made.snapshot.episode_count == 0
    assert made.snapshot.payload["retrieval"]["no_memory_reason"] == "below_floor"


def test_an_irrelevant_english_question_injects_nothing_with_the_shipped_floor(keys, system, shipped_floor):
    for content in ["I work as a nurse at the city hospital", "My cat is called Miso", "I prefer short answers"]:
        episodes.remember(keys, system, content, sender_id="sam")

    made = injection.record_injection(keys, system, "How do I reset my wifi router?", sender_id="sam", top_k=3)

    assert made.snapshot.episode_count == 0


def test_the_askers_own_weaker_answer_comes_before_another_speakers_job(keys, system, shipped_floor):
    """Sam asks "What is my job?": his "I work as a pilot" scores 0.27 (under the floor 0.30, which
    Pat's nurse job passes), so only Pat's job was injected. A question about the asker takes their
    own episodes down to 5/6 of the floor; everyone else's still meet the floor."""
    episodes.remember(keys, system, "I work as a nurse at the city hospital", sender_id="p1", sender_name="Pat")
    pilot = episodes.remember(
        keys, system, "I work as a pilot for a small airline", sender_id="p2", sender_name="Sam"
    ).episode
    episodes.remember(keys, system, "I like jazz music", sender_id="p3", sender_name="Bob")

    made = injection.record_injection(keys, system, "What is my job?", sender_id="p2", top_k=3)

    assert made.hits[0].episode.episode_id == pilot.episode_id
    assert shipped_floor * retrieval.ABOUT_FLOOR <= made.hits[0].breakdown.relevance < shipped_floor
    assert all(hit.breakdown.relevance >= shipped_floor for hit in made.hits[1:])
    assert "jazz" not in " ".join(hit.episode.content for hit in made.hits)


def test_a_query_of_more_terms_than_one_lookup_statement_holds_still_finds_its_episode(keys, system):
    episode = episodes.remember(keys, system, "the harbour key hangs behind the lighthouse door").episode
    words = " ".join(f"w{i}x" for i in range(lexical.LOOKUP_CHUNK))

    query = lexical.LexicalQuery.build(keys.user_key, words + " lighthouse")

    assert len(query.tokens) > lexical.LOOKUP_CHUNK  # two statements
    assert query.candidates(5) == [episode.pk]
    assert query.frequencies[next(t for t in query.tokens if t == "hou")] == 1
