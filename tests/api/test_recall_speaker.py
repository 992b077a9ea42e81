"""The bot API's recall with a current speaker, the relevance floor and the lexical part (issue 16)."""

from __future__ import annotations

import pytest

from memconsole import settings as project_settings

from .conftest import SCOPE_A

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def relevance_floor(memory_settings):
    """The relevance floor as shipped (the suite's conftest turns it off for everything else)."""
    memory_settings.MEMCONSOLE_RECALL_MIN_SIMILARITY = project_settings.MEMCONSOLE_RECALL_MIN_SIMILARITY
    return memory_settings.MEMCONSOLE_RECALL_MIN_SIMILARITY


def _remember(api, content: str, sender_id: str, sender_name: str) -> str:
    body = {**SCOPE_A, "content": content, "sender_id": sender_id, "sender_name": sender_name}
    response = api.post("remember", body)
    assert response.status_code == 201
    return str(response.json()["episode_id"])


@pytest.fixture
def chat(api):
    return {
        "sam": _remember(api, "My favourite food is ramen, I eat it every Friday", "sam", "Sam"),
        "bob": _remember(api, "I love a good steak with fries", "bob", "Bob"),
        "bob_trip": _remember(api, "Next week I have a business trip to Chicago", "bob", "Bob"),
    }


def test_speaker_id_puts_the_askers_own_memory_first_and_does_not_filter(api, chat, settings):
    settings.MEMCONSOLE_RECALL_MIN_SIMILARITY = 0.3
    asked = {**SCOPE_A, "query": "what food do I like?", "top_k": 3}

    anyone = api.post("recall", asked).json()["episodes"]
    bob = api.post("recall", {**asked, "speaker_id": "bob"}).json()["episodes"]

    assert anyone[0]["episode_id"] == chat["sam"]
    assert bob[0]["episode_id"] == chat["bob"] and bob[0]["breakdown"]["speaker"] == pytest.approx(1.12)
    assert chat["sam"] in [hit["episode_id"] for hit in bob]  # a speaker is not a filter
    only_sam = api.post("recall", {**asked, "sender_id": "sam"}).json()["episodes"]
    assert [hit["episode_id"] for hit in only_sam] == [chat["sam"]]  # sender_id is


def test_recall_shows_the_lexical_part_and_answers_nothing_below_the_floor(api, chat):
    [hit] = api.post("recall", {**SCOPE_A, "query": "business trip to Chicago", "top_k": 1}).json()["episodes"]
    assert hit["episode_id"] == chat["bob_trip"]
    parts = hit["breakdown"]
    assert parts["lexical"] > 0.9
    assert parts["relevance"] == pytest.approx(0.7 * parts["similarity"] + 0.3 * parts["lexical"], abs=1e-5)

    response = api.post("recall", {**SCOPE_A, "query": "quantum chromodynamics lecture", "top_k": 5})
    assert response.status_code == 200 and response.json()["episodes"] == []


def test_inject_puts_the_speakers_own_memory_in_the_prompt(api, chat, settings):
    settings.MEMCONSOLE_RECALL_MIN_SIMILARITY = 0.3  # Bob's steak is ~0.35 relevant among 3 memories
    body = {**SCOPE_A, "query": "what food do I like?", "sender_id": "bob", "sender_name": "Bob", "top_k": 1}
    response = api.post("inject", body)
    assert response.status_code == 200
    episodes = response.json()["context"]["episodes"]
    assert [e["episode_id"] for e in episodes] == [chat["bob"]]


@pytest.mark.parametrize("blank", [" ", "\n", "\u200b", "\u2028"])
def test_a_sender_filter_of_blanks_only_is_refused_not_read_as_every_speaker(api, chat, blank):
    """Found by probing the API: " " or "\\u200b" as sender_id answered every speaker's memories."""
    response = api.post("recall", {**SCOPE_A, "query": "what food do I like?", "sender_id": blank})

    assert response.status_code == 422
    error = response.json()["error"]
    assert error["field"] == "sender_id" and "only spaces or invisible characters" in error["message"]


def test_an_empty_sender_filter_is_every_speakers(api, chat, settings):
    settings.MEMCONSOLE_RECALL_MIN_SIMILARITY = 0.0
    asked = {**SCOPE_A, "query": "what food do I like?", "top_k": 5}
    everyone = {hit["sender_id"] for hit in api.post("recall", {**asked, "sender_id": ""}).json()["episodes"]}
    assert everyone == {"sam", "bob"}
