"""Recall that knows who is asking (issue 16): speaker-first retrieval, the relevance floor, the
hybrid lexical index (hashed, scope-keyed, kept with every write) and the snapshot's whole decision."""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography.fernet import Fernet
from django.db import connection, transaction

from memconsole.lib import embeddings
from memconsole.memory import episodes, injection, lexical, ranking, retrieval
from memconsole.memory.models import Episode
from memconsole.memory.scopes import derive_scope

# The relevance floor as shipped (tests/conftest.py's `shipped_floor`; the suite turns it off elsewhere).
pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("shipped_floor")]


CHAT = [
    ("xu", "徐强", "我最喜欢吃四川火锅，越辣越好"),
    ("xu", "徐强", "我下周三要去成都出差"),
    ("sam", "Sam", "My favourite food is ramen, I eat it every Friday"),
    ("sam", "Sam", "I'm flying to Berlin for a conference next month"),
    ("bob", "Bob", "I love a good steak with fries"),
    ("bob", "Bob", "Next week I have a business trip to Chicago"),
    ("lucia", "Lucía", "Mi comida favorita es la paella de mariscos"),
]


@pytest.fixture
def chat(keys, system):
    made = {}
    for sender, name, content in CHAT:
        made[content] = episodes.remember(keys, system, content, sender_id=sender, sender_name=name).episode
    return made


def _stored_tokens(episode: Episode) -> str:
    postgres = connection.vendor == "postgresql"
    column = "episode_id" if postgres else "rowid"
    tokens = "array_to_string(tsvector_to_array(tokens), ' ')" if postgres else "tokens"
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {tokens} FROM {lexical.TABLE} WHERE {column} = %s", [episode.pk])
        row = cursor.fetchone()
    return "" if row is None else str(row[0])


def _ids(hits: list[retrieval.RecallHit]) -> list[str]:
    return [hit.episode.content for hit in hits]


# --- speaker-first ------------------------------------------------------------------------------


def test_a_first_person_question_returns_the_askers_own_memory_first(keys, chat, settings):
    settings.MEMCONSOLE_RECALL_MIN_SIMILARITY = 0.3  # Bob's steak is ~0.35 relevant among 7 memories
    # Without the speaker, Sam's ramen is the nearest "food" memory; asked by Bob it is Bob's steak.
    assert _ids(retrieval.recall(keys, "what food do I like?", top_k=3))[0] != "I love a good steak with fries"

    hits = retrieval.recall(keys, "what food do I like?", top_k=3, speaker_id="bob")

    assert _ids(hits)[0] == "I love a good steak with fries"
    assert hits[0].breakdown.speaker == pytest.approx(1.12)


def test_inject_searches_the_speakers_own_episodes_first(keys, system, chat):
    made = injection.record_injection(keys, system, "我下周去哪里出差?", sender_id="xu", sender_name="徐强", top_k=3)

    assert made.hits[0].episode.content == "我下周三要去成都出差"
    decision = made.snapshot.payload["retrieval"]
    assert decision["speaker_id"] == "xu" and decision["speaker_name"] == "徐强"
    assert decision["query"] == "我下周去哪里出差?" and decision["first_person"] is True
    first = decision["candidates"][0]
    assert first["outcome"] == "injected" and "speaker" in first["stages"]


def test_sender_id_stays_a_filter_and_speaker_id_does_not_filter(keys, chat, settings):
    settings.MEMCONSOLE_RECALL_MIN_SIMILARITY = 0.0
    filtered = retrieval.recall(keys, "what food do I like?", top_k=5, sender_id="sam")
    assert filtered and {hit.episode.sender_id for hit in filtered} == {"sam"}

    speaking = retrieval.recall(keys, "what food do I like?", top_k=5, speaker_id="sam")
    assert {hit.episode.sender_id for hit in speaking} - {"sam"}  # others' memories still come back


# --- the relevance floor ------------------------------------------------------------------------


def test_an_irrelevant_question_recalls_and_injects_nothing_and_the_snapshot_says_why(keys, system, chat):
    assert retrieval.recall(keys, "quantum chromodynamics lecture", top_k=5) == []

    made = injection.record_injection(keys, system, "quantum chromodynamics lecture", sender_id="sam", top_k=3)

    assert made.hits == [] and made.snapshot.episode_count == 0
    decision = made.snapshot.payload["retrieval"]
    assert decision["no_memory_reason"] == "below_floor"
    assert decision["candidates"] and {c["outcome"] for c in decision["candidates"]} == {"below_floor"}
    assert all("lexical" in c["breakdown"] and "relevance" in c["breakdown"] for c in decision["candidates"])


@pytest.mark.parametrize("question", ["is the", "of the", "I am", "in my", "my", "the the the"])
def test_a_question_of_function_words_only_recalls_and_injects_nothing(keys, system, chat, question):
    """Sharing only "the" or "my" with a memory is no match (found by probing the API: every such
    question injected three unrelated memories)."""
    assert retrieval.recall(keys, question, top_k=5) == []
    assert injection.record_injection(keys, system, question, sender_id="sam", top_k=3).hits == []


MIXED_CHAT = [
    ("li", "李娜", "我喜欢喝绿茶"),
    ("li", "李娜", "我养了一只猫"),
    ("li", "李娜", "我下个月要去上海出差"),
    ("ana", "Ana", "Mi hermana vive en Sevilla"),
    ("ana", "Ana", "Trabajo como profesora en Madrid"),
    ("tom", "Tom", "I play tennis on Sundays"),
]


@pytest.mark.parametrize("message", ["👍", "😂", "🙏", "Gracias", "Buenas noches", "Hola a todos"])
def test_an_emoji_or_a_greeting_injects_none_of_the_chinese_or_spanish_memories(keys, system, message):
    """The English-only model rates any memory it cannot read 0.45-0.55 alike to anything: found by
    probing the API, "👍" injected three Chinese memories and "Gracias" a Spanish one."""
    for sender, name, content in MIXED_CHAT:
        episodes.remember(keys, system, content, sender_id=sender, sender_name=name)

    assert retrieval.recall(keys, message, top_k=5) == []
    assert injection.record_injection(keys, system, message, sender_id="tom", sender_name="Tom", top_k=3).hits == []


def test_an_english_question_still_finds_an_english_memory_among_chinese_and_spanish_ones(keys, system):
    for sender, name, content in MIXED_CHAT:
        episodes.remember(keys, system, content, sender_id=sender, sender_name=name)

    hits = retrieval.recall(keys, "Who plays tennis?", top_k=3)

    assert _ids(hits)[:1] == ["I play tennis on Sundays"]
    parts = hits[0].breakdown.as_dict()  # an English memory keeps the English query's 0.7
    assert parts["relevance"] == pytest.approx(0.7 * parts["similarity"] + 0.3 * parts["lexical"], abs=1e-5)


def test_a_memory_counts_as_chinese_when_most_of_it_is():
    assert ranking.mostly_cjk("我喜欢喝绿茶") and ranking.mostly_cjk("我喜欢 tennis")
    assert not ranking.mostly_cjk("Met 徐强 for lunch") and not ranking.mostly_cjk("I play tennis")


def test_the_floor_is_a_setting_and_zero_turns_it_off(keys, chat, settings):
    settings.MEMCONSOLE_RECALL_MIN_SIMILARITY = 0.0
    assert len(retrieval.recall(keys, "quantum chromodynamics lecture", top_k=3)) == 3
    settings.MEMCONSOLE_RECALL_MIN_SIMILARITY = 1.0
    assert retrieval.recall(keys, "what food do I like?", top_k=3) == []


def test_a_snapshot_records_candidates_cut_by_top_k(keys, system, chat):
    made = injection.record_injection(keys, system, "Where is my next business trip?", sender_id="bob", top_k=1)

    outcomes = [c["outcome"] for c in made.snapshot.payload["retrieval"]["candidates"]]
    assert outcomes[0] == "injected" and outcomes.count("injected") == 1
    assert "cut_by_top_k" in outcomes
    assert made.snapshot.payload["retrieval"]["candidates_total"] >= len(outcomes)


# --- hybrid: the lexical index ------------------------------------------------------------------


def test_the_lexical_part_is_in_the_breakdown_and_finds_cjk_words(keys, chat):
    hits = retrieval.recall(keys, "成都", top_k=3)

    assert hits and hits[0].episode.content == "我下周三要去成都出差"
    parts = hits[0].breakdown.as_dict()
    assert parts["lexical"] == pytest.approx(1.0)
    # A Chinese query with the English-only default model: the lexical score leads (0.3 / 0.7).
    assert parts["relevance"] == pytest.approx(0.3 * parts["similarity"] + 0.7 * parts["lexical"], abs=1e-5)


def test_an_english_query_fuses_seven_tenths_vector_three_tenths_lexical(keys, chat):
    hits = retrieval.recall(keys, "business trip to Chicago", top_k=1)

    parts = hits[0].breakdown.as_dict()
    assert hits[0].episode.content == "Next week I have a business trip to Chicago" and parts["lexical"] > 0.5
    assert parts["relevance"] == pytest.approx(0.7 * parts["similarity"] + 0.3 * parts["lexical"], abs=1e-5)


def test_a_word_counts_only_when_most_of_it_is_there(keys, system):
    """A one-word greeting shared one trigram with any word ("gracias" / "pharmacist": "aci") and
    so a quarter of its lexical weight: found by probing, "Gracias" injected three such memories."""
    for content in ("Giulia works as a pharmacist", "Wen is moving to Buenos Aires", "Bob booked two trips"):
        episodes.remember(keys, system, content)
    score = lambda query, doc: lexical.LexicalQuery.build(keys.user_key, query).score(doc)  # noqa: E731

    assert score("Gracias", "Giulia works as a pharmacist") == 0.0
    assert score("Buenas noches", "Wen is moving to Buenos Aires") == 0.0
    assert score("trip", "Bob booked two trips") > 0.5  # an inflected word still counts
    assert score("Buenos Aires", "Wen is moving to Buenos Aires") == pytest.approx(1.0)
    assert score("成都出差", "我下周三要去成都出差") == pytest.approx(1.0)  # CJK runs keep their bigrams


def test_terms_cover_cjk_bigrams_and_accent_free_trigrams():
    assert {"成都", "出差", "下周"} <= lexical.terms("我下周三要去成都出差")
    assert lexical.terms("México") == lexical.terms("mexico")
    assert "#vi" in lexical.terms("viajo") & lexical.terms("viaja")


@pytest.mark.parametrize("encrypted", [False, True])
def test_the_index_holds_no_readable_text(keys, system, settings, encrypted):
    if encrypted:
        settings.MEMCONSOLE_FERNET_KEYS = [Fernet.generate_key().decode()]
    episode = episodes.remember(keys, system, "Secret plan: meet Zhang at the harbour", sender_name="Mallory").episode

    stored = _stored_tokens(episode).lower()

    assert stored
    for word in ("secret", "plan", "zhang", "harbour", "mallory", "har", "sec"):
        assert word not in stored
    assert retrieval.recall(keys, "harbour meeting with Zhang", top_k=1)[0].episode.episode_id == episode.episode_id


def test_the_same_words_in_two_scopes_give_different_tokens(keys, other_keys, system):
    mine = episodes.remember(keys, system, "the blue door code is 4417").episode
    theirs = episodes.remember(other_keys, system, "the blue door code is 4417").episode

    assert set(_stored_tokens(mine).split()).isdisjoint(_stored_tokens(theirs).split())
    assert lexical.LexicalQuery.build(keys.user_key, "blue door code").candidates(10) == [mine.pk]


def test_edits_through_save_reindex_and_deletes_remove_the_entry(keys, system):
    episode = episodes.remember(keys, system, "I keep bees on the roof").episode
    before = _stored_tokens(episode)

    with transaction.atomic():
        episode.set_content("I grow tomatoes on the balcony")
        episode.save(update_fields=["content_stored", "encrypted"])

    after = set(_stored_tokens(episode).split())
    assert after != set(before.split())
    assert lexical.token(keys.user_key, "tom") in after and lexical.token(keys.user_key, "bee") not in after
    assert lexical.LexicalQuery.build(keys.user_key, "tomatoes balcony").candidates(5) == [episode.pk]

    episodes.delete(keys, system, [episode.episode_id])
    assert _stored_tokens(episode) == ""
    assert lexical.missing_count() == 0


def test_rebuild_repairs_rows_written_around_save(keys, system):
    row = Episode.create(
        keys,
        "bulk imported: sailing in Norway",
        tags=[],
        importance=2,
        timestamp=None,
        sender_id="",
        sender_name="",
        source="import",
    )
    Episode.objects.bulk_create([row])
    assert lexical.missing_count() == 1

    assert lexical.rebuild(keys.user_key) == 1

    assert lexical.missing_count() == 0
    assert lexical.LexicalQuery.build(keys.user_key, "sailing norway").candidates(5)


def test_without_a_model_recall_uses_the_lexical_index(keys, system, settings, tmp_path: Path):
    settings.MEMCONSOLE_MODEL_DIR = tmp_path / "no-model"
    assert embeddings.get_embedder().is_fallback
    episodes.remember(keys, system, "The wifi password is on the fridge")
    episodes.remember(keys, system, "We adopted a dog called Pixel")

    hits = retrieval.recall(keys, "where is the wifi password", top_k=3)

    assert [hit.episode.content for hit in hits] == ["The wifi password is on the fridge"]
    assert hits[0].breakdown.relevance == pytest.approx(hits[0].breakdown.lexical)


def test_another_scopes_episodes_never_surface(keys, other_keys, system):
    episodes.remember(other_keys, system, "the launch code is under the mat", sender_id="eve")
    episodes.remember(keys, system, "I like tea", sender_id="eve")

    hits = retrieval.recall(keys, "the launch code is under the mat", top_k=5, speaker_id="eve")

    assert all(hit.episode.user_key == keys.user_key for hit in hits)
    assert derive_scope("bot-a", "group_100", "session").user_key == keys.user_key


def test_the_same_memory_remembered_twice_is_injected_once(keys, system):
    """Found by a bot developer: a bot that remembered a preference three times got its top_k of 3
    filled with three copies of one line."""
    for _ in range(3):
        episodes.remember(keys, system, "I prefer short answers with bullet points", sender_id="sam")
    episodes.remember(keys, system, "I  prefer SHORT answers with bullet points ", sender_id="sam")
    episodes.remember(keys, system, "I like answers that are short and to the point", sender_id="sam")

    made = injection.record_injection(keys, system, "How should you answer me?", sender_id="sam", top_k=3)

    texts = [" ".join(hit.episode.content.casefold().split()) for hit in made.hits]
    assert texts and len(texts) == len(set(texts))
    outcomes = [c["outcome"] for c in made.snapshot.payload["retrieval"]["candidates"]]
    assert outcomes.count("duplicate") == 3 and outcomes.count("injected") == len(texts)
