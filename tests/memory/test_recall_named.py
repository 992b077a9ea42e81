"""Recall rules of issue 16, round 6: a question naming a speaker is about that speaker (searched
first, weighted and ranked as the asker of a first-person question is), function words carry no
lexical weight, and first-person detection reads the text as typed."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from memconsole.memory import episodes, injection, lexical, people, profiles, ranking, retrieval

pytestmark = pytest.mark.django_db

PEOPLE = [("gc-sam", "Sam"), ("u1001", "Sam Okafor"), ("gc-bob", "Bob"), ("gc-lina", "李娜"), ("gc-lucia", "Lucía")]


@pytest.mark.parametrize(
    ("query", "named"),
    [
        ("What does Sam do for work?", ["gc-sam"]),  # the whole name: "Sam Okafor" is not named
        ("what does sam like to eat?", ["gc-sam"]),
        ("Where is Bob's business trip?", ["gc-bob"]),
        ("What does Sam Okafor do?", ["u1001", "gc-sam"]),  # the longer name first
        ("李娜是做什么工作的?", ["gc-lina"]),
        ("¿Dónde trabaja Lucía?", ["gc-lucia"]),
        ("What does Samantha do?", []),  # a name is a whole word
        ("Where is my next business trip?", []),
    ],
)
def test_it_finds_the_speakers_a_question_names(query, named):
    assert ranking.named_speakers(query, PEOPLE) == named


def test_it_does_not_name_the_asker_or_a_one_letter_name():
    assert ranking.named_speakers("What does Sam like?", PEOPLE, exclude="gc-sam") == []
    assert ranking.named_speakers("What is a good plan?", [("x", "A")]) == []


def test_a_question_naming_a_speaker_gets_their_answering_memory_first_however_old(keys, system):
    now = timezone.now()
    job = episodes.remember(
        keys,
        system,
        "I work as a nurse at the city hospital",
        sender_id="gc-sam",
        sender_name="Sam",
        timestamp=now - timedelta(days=45),
    ).episode
    episodes.remember(keys, system, "I prefer short answers", sender_id="gc-sam", sender_name="Sam", timestamp=now)
    for i, content in enumerate(
        [
            "Sam said the work laptop needs a new charger",
            "Sam asked what time work starts on Monday",
            "Sam from work recommended a sushi place",
        ]
    ):
        episodes.remember(keys, system, content, sender_id=f"u10{i}", sender_name=f"Sam Okafor{i}", timestamp=now)

    found = retrieval.retrieve(keys, "What does Sam do for work?", top_k=3)

    # Another "Sam …" mentions work, fresher; the question names the speaker Sam: Sam's own memory
    # that answers it comes first, weighted as the current speaker, and the decision says why.
    assert found.hits[0].episode.episode_id == job.episode_id
    assert found.hits[0].breakdown.speaker == pytest.approx(ranking.SPEAKER_WEIGHT)
    assert found.named == ["gc-sam"]
    assert found.explanation()["named_speakers"] == ["gc-sam"]
    assert retrieval.NAMED_STAGE in found.candidates[0].stages


def test_a_named_speaker_is_searched_within_a_sender_filter_only_when_it_is_that_sender(keys, system):
    episodes.remember(keys, system, "I work as a nurse", sender_id="gc-sam", sender_name="Sam")
    episodes.remember(keys, system, "Sam works as a pilot", sender_id="gc-bob", sender_name="Bob")

    found = retrieval.retrieve(keys, "What does Sam do for work?", top_k=3, sender_id="gc-bob")

    assert found.named == []
    assert {hit.episode.sender_id for hit in found.hits} == {"gc-bob"}


def test_function_words_carry_no_lexical_weight(keys, system):
    siesta = episodes.remember(keys, system, "Es la hora de mi siesta", sender_id="lucia").episode
    for i in range(5):
        episodes.remember(keys, system, f"The meeting number {i} moved to the blue room", sender_id="sam")

    query = lexical.LexicalQuery.build(keys.user_key, "¿Cuál es la capital de Australia?")

    # "es", "la", "de" are rare in this mostly English scope (high idf): their terms weigh at most
    # the idf of a term in half the scope and are not looked up, so an episode sharing only them with
    # the question scores little (it scored ~0.3 when they weighed like "Australia") and is no candidate.
    assert {"#es", "la#", "de#"} <= query.function_terms
    assert max(query.weights[t] for t in query.function_terms) <= lexical.FUNCTION_WORD_IDF
    assert query.weights["#au"] > 3 * lexical.FUNCTION_WORD_IDF
    assert query.score(lexical.document_text(siesta)) < 0.1
    assert siesta.pk not in query.candidates(5)
    assert lexical.query_terms("¿Qué es?") == set()
    assert lexical.query_terms("la paella") == lexical.terms("paella")


@pytest.mark.parametrize(
    ("query", "spanish"),
    [
        ("¿Cuál es la capital de Australia?", True),
        ("¿En qué trabajo?", True),
        ("¿Dónde trabaja Lucía?", True),
        ("Paella valenciana", False),  # no function word: no guess, the usual weights
        ("Where is la Sagrada Familia?", False),  # English function words
        ("What is my job?", False),
    ],
)
def test_it_reads_a_question_as_spanish_by_its_function_words(query, spanish):
    assert lexical.reads_as_spanish(query) is spanish


def test_the_vector_weight_drops_for_a_spanish_query_only_with_an_english_only_model():
    assert ranking.vector_weight("¿Cuál es la capital?", english_only=True, spanish=True) == pytest.approx(0.3)
    assert ranking.vector_weight("¿Cuál es la capital?", english_only=False, spanish=True) == pytest.approx(0.7)
    assert ranking.vector_weight("¿Cuál es la capital?", english_only=True) == pytest.approx(0.7)


def test_an_irrelevant_spanish_question_injects_nothing_from_spanish_memories(keys, system, shipped_floor):
    # The English-only model rates these Spanish sentences ~0.43 alike: at 0.7 × similarity they
    # would pass the floor; read as Spanish, the similarity counts 0.3 and the lexical score leads.
    for content in ["Mi comida favorita es la paella de mariscos", "Trabajo como abogada en Madrid"]:
        episodes.remember(keys, system, content, sender_id="lucia")
    for i in range(5):
        episodes.remember(keys, system, f"The meeting number {i} moved to the blue room", sender_id="sam")

    made = injection.record_injection(keys, system, "¿Cuál es la capital de Australia?", sender_id="sam", top_k=3)

    assert made.snapshot.episode_count == 0


def test_spanish_first_person_verbs_are_read_on_the_text_as_typed():
    # casefold() turns each ß into "ss": offsets found in the folded text, used to slice the typed
    # one, pointed past the name ending the question ("… hoy, Sam?" is about Sam, not the asker).
    prefix = "Weißwurst, Weißbier, Grießbrei, Spießbraten, Süßspeisen, Maß, Fußball: "
    assert not ranking.is_first_person("¿qué como hoy, Sam?")
    assert not ranking.is_first_person(prefix + "¿qué como hoy, Sam?")
    assert ranking.is_first_person(prefix + "¿Qué como hoy?")
    assert ranking.is_first_person("¿EN QUÉ TRABAJO?")


def test_known_speakers_are_named_by_the_newest_name_they_gave(keys, system):
    """Each speaker once, with the newest non-empty name of the scope's newest episodes; a speaker
    with only a profile is known by id alone."""
    episodes.remember(keys, system, "first", sender_id="u1", sender_name="Sam")
    episodes.remember(keys, system, "second", sender_id="u1", sender_name="Samuel")
    episodes.remember(keys, system, "third", sender_id="u1", sender_name="")
    episodes.remember(keys, system, "fourth", sender_id="u2", sender_name="Lucía")
    profiles.update_profile(keys, system, "speaker", sender_id="u3", name="Pat")

    assert people.known_speakers(keys) == [("u1", "Samuel"), ("u2", "Lucía"), ("u3", "")]
