"""The snapshot screen shows the whole decision: injected memories beside the near misses (issue 16)."""

from __future__ import annotations

import pytest

from memconsole import settings as project_settings
from memconsole.memory.episodes import remember
from memconsole.memory.injection import record_injection

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def relevance_floor(memory_settings):
    """The relevance floor as shipped (the suite's conftest turns it off for everything else)."""
    memory_settings.MEMCONSOLE_RECALL_MIN_SIMILARITY = project_settings.MEMCONSOLE_RECALL_MIN_SIMILARITY
    return memory_settings.MEMCONSOLE_RECALL_MIN_SIMILARITY


def test_it_shows_injected_memories_beside_the_near_misses(viewer_client, url, light_scope, keys, system, settings):
    settings.MEMCONSOLE_RECALL_MIN_SIMILARITY = 0.3  # both memories above it: one injected, one cut by top_k
    remember(keys, system, "I love a good steak with fries", sender_id="bob", sender_name="Bob")
    remember(keys, system, "My favourite food is ramen, I eat it every Friday", sender_id="sam", sender_name="Sam")
    made = record_injection(keys, system, "what food do I like?", sender_id="bob", sender_name="Bob", top_k=1)

    page = viewer_client.get(url("injection_detail", light_scope.pk, made.snapshot.snapshot_id)).content.decode()

    assert "Why these memories" in page and "Near misses" in page
    assert "own memories came first" in page
    decision = page.split("Why these memories", 1)[1]
    injected, near_misses = decision.split("Near misses", 1)
    assert "steak" in injected and "ramen" not in injected
    assert "ramen" in near_misses and "dropped: cut by top_k" in near_misses
    assert 'data-factor="lexical"' in page


def test_it_says_when_nothing_was_injected(viewer_client, url, light_scope, keys, system):
    remember(keys, system, "I love a good steak with fries", sender_id="bob")
    made = record_injection(keys, system, "quantum chromodynamics lecture", sender_id="bob", top_k=3)

    page = viewer_client.get(url("injection_detail", light_scope.pk, made.snapshot.snapshot_id)).content.decode()

    assert "every candidate was below the relevance floor" in page
    assert "dropped: below the relevance floor" in page


def test_it_names_the_speaker_the_question_was_about(viewer_client, url, light_scope, keys, system):
    remember(keys, system, "I work as a nurse at the city hospital", sender_id="gc-sam", sender_name="Sam")
    remember(keys, system, "I prefer short answers", sender_id="gc-bob", sender_name="Bob")
    made = record_injection(keys, system, "What does Sam do for work?", sender_id="gc-bob", top_k=3)

    page = viewer_client.get(url("injection_detail", light_scope.pk, made.snapshot.snapshot_id)).content.decode()

    assert "The question names Sam: their memories were searched first too." in page


def test_a_speaker_is_named_by_the_name_they_gave_before_a_nameless_message(
    viewer_client, url, light_scope, keys, system
):
    remember(keys, system, "I work as a nurse at the city hospital", sender_id="gc-sam", sender_name="Sam")
    remember(keys, system, "I started running on Sundays", sender_id="gc-sam")  # this platform sent no name
    remember(keys, system, "I prefer short answers", sender_id="gc-bob", sender_name="Bob")
    made = record_injection(keys, system, "What does Sam do for work?", sender_id="gc-bob", top_k=3)

    page = viewer_client.get(url("injection_detail", light_scope.pk, made.snapshot.snapshot_id)).content.decode()

    assert "The question names Sam: their memories were searched first too." in page
