"""Time travel (issue 18): what the bot knew at a moment, rebuilt from profile versions and the
audit chain, and the difference between two moments."""

from __future__ import annotations

import pytest
from django.utils import timezone

from memconsole.memory import editing, episodes, profiles, timetravel
from memconsole.memory.audit import Actor
from memconsole.memory.errors import PermissionDenied

pytestmark = pytest.mark.django_db


def contents(knowledge: timetravel.Knowledge) -> dict[str, str]:
    return {e.content: e.changed_since for e in knowledge.episodes}


def remember(keys, system, content, sender_id, **fields):
    return episodes.remember(keys, system, content, sender_id=sender_id, **fields).episode


def test_it_rebuilds_what_was_known_before_and_after_a_day_of_changes(keys, system):
    remember(keys, system, "Alice lives in Paris", "u1", sender_name="Alice")
    plan = remember(keys, system, "Alice plans a trip to Rome in June", "u1", sender_name="Alice")
    cat = remember(keys, system, "Bob's cat is called Tom", "u2", sender_name="Bob")
    profiles.update_profile(keys, system, "speaker", "u1", name="Alice")
    before = timezone.now()

    berlin = episodes.remember(keys, system, "Alice lives in Berlin, not Paris", sender_id="u1", tags=["correction"])
    assert berlin.superseded  # the Paris memory is superseded now
    episodes.archive(keys, system, [plan.episode_id])
    episodes.delete(keys, system, [cat.episode_id])
    profiles.update_profile(keys, system, "speaker", "u1", add_traits=["drinks tea"])
    after = timezone.now()

    then = timetravel.known_at(keys, system, before)
    assert contents(then) == {
        "Alice lives in Paris": "superseded",
        "Alice plans a trip to Rome in June": "archived",
        "Bob's cat is called Tom": "deleted",
    }
    alice_then = next(p for p in then.profiles if p.sender_id == "u1")
    assert (alice_then.version, alice_then.data["traits"]) == (1, [])

    now = timetravel.known_at(keys, system, after)
    assert contents(now) == {"Alice lives in Berlin, not Paris": ""}
    alice_now = next(p for p in now.profiles if p.sender_id == "u1")
    assert (alice_now.version, alice_now.data["traits"]) == (2, ["drinks tea"])

    diff = timetravel.difference(then, now)
    assert [e.content for e in diff.added] == ["Alice lives in Berlin, not Paris"]
    assert {e.content for e in diff.removed} == {
        "Alice lives in Paris",
        "Alice plans a trip to Rome in June",
        "Bob's cat is called Tom",
    }
    assert ("speaker", "u1", "traits", [], ["drinks tea"]) in diff.profiles


def test_each_field_is_as_it_was_whatever_changed_it_first(keys, system):
    """An edit records only the fields it changed: an archive, a content edit or a reassignment
    later than the first change after T is still undone (found by a user of "What did the bot know?")."""
    edited_then_archived = remember(keys, system, "Alice works at the bakery", "u1", sender_name="Alice")
    weighed_then_rewritten = remember(keys, system, "Bob runs on Sundays", "u2", sender_name="Bob", importance=3)
    deleted_later = remember(keys, system, "Carol sings in a choir", "u3", sender_name="Carol")
    moment = timezone.now()

    editing.edit_episode(keys, system, edited_then_archived.episode_id, content="Alice works at the library")
    episodes.archive(keys, system, [edited_then_archived.episode_id])
    editing.edit_episode(keys, system, weighed_then_rewritten.episode_id, importance=5)
    editing.edit_episode(keys, system, weighed_then_rewritten.episode_id, content="Bob runs on Saturdays")
    editing.reassign_speaker(keys, system, weighed_then_rewritten.episode_id, "u9", "Dan")
    editing.edit_episode(keys, system, deleted_later.episode_id, content="Carol sings in a band")
    episodes.delete(keys, system, [deleted_later.episode_id])

    then = {e.episode_id: e for e in timetravel.known_at(keys, system, moment).episodes}
    assert then[edited_then_archived.episode_id].content == "Alice works at the bakery"
    bob = then[weighed_then_rewritten.episode_id]
    assert (bob.content, bob.importance, bob.sender_id, bob.sender_name) == ("Bob runs on Sundays", 3, "u2", "Bob")
    assert (then[deleted_later.episode_id].content, then[deleted_later.episode_id].changed_since) == (
        "Carol sings in a choir",
        "deleted",
    )
    bobs = timetravel.known_at(keys, system, moment, speaker_id="u2").episodes
    assert [e.content for e in bobs] == ["Bob runs on Sundays"]  # his at the time, though Dan's now
    assert timetravel.known_at(keys, system, moment, speaker_id="u9").episodes == []


def test_one_speaker_and_a_moment_before_anything(keys, system):
    start = timezone.now()
    remember(keys, system, "Alice lives in Paris", "u1")
    remember(keys, system, "Bob's cat is called Tom", "u2")
    later = timezone.now()
    assert contents(timetravel.known_at(keys, system, later, speaker_id="u2")) == {"Bob's cat is called Tom": ""}
    empty = timetravel.known_at(keys, system, start)
    assert empty.episodes == []
    assert [(p.type, p.version) for p in empty.profiles] == [("session", 0)]


def test_another_chat_and_another_bot_are_not_part_of_it(keys, other_keys, system):
    remember(keys, system, "Alice lives in Paris", "u1")
    remember(other_keys, system, "Zed keeps the blue door key", "u9")
    moment = timezone.now()
    assert contents(timetravel.known_at(keys, system, moment)) == {"Alice lives in Paris": ""}
    limited = Actor("user", "limited", frozenset({"bot-b"}))
    with pytest.raises(PermissionDenied):
        timetravel.known_at(keys, limited, moment)
