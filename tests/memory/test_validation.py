"""Bad input to every operation: a clear ValidationError (naming the field) or NotFound, and no change at all."""

from __future__ import annotations

from datetime import datetime

import pytest

from memconsole.memory import episodes, injection, profiles, retrieval, validation
from memconsole.memory.errors import NotFound, ValidationError
from memconsole.memory.scopes import derive_scope

pytestmark = pytest.mark.django_db

UNKNOWN = derive_scope("bot-z", "group_999", "session")


@pytest.fixture
def seeded(keys, system, settings):
    """A scope with an episode and a speaker profile holding 20 traits and 10 preferences."""
    settings.MEMCONSOLE_MAX_CONTENT_CHARS = 200
    episode = episodes.remember(keys, system, "A perfectly fine memory", sender_id="u1").episode
    profiles.update_profile(
        keys,
        system,
        "speaker",
        "u1",
        add_traits=[f"trait {n}" for n in range(20)],
        add_preferences=[f"preference {n}" for n in range(10)],
    )
    return episode


def _bad_calls(keys, system, episode_id):
    """(expected error, field or None, call) for each kind of bad input."""
    V, N = ValidationError, NotFound
    remember = lambda content="ok", **kw: episodes.remember(keys, system, content, **kw)  # noqa: E731
    return [
        # remember
        (V, "content", lambda: remember("")),
        (V, "content", lambda: remember("   \n\t")),
        (V, "content", lambda: remember("\u200b\u200b")),  # invisible characters only: empty too
        (V, "content", lambda: remember(" \ufeff\u2060 ")),
        (V, "content", lambda: remember(None)),
        (V, "content", lambda: remember(42)),
        (V, "content", lambda: remember("x" * 201)),
        (V, "content", lambda: remember("nul \x00 inside")),
        (V, "importance", lambda: remember(importance="3")),
        (V, "importance", lambda: remember(importance=True)),
        (V, "importance", lambda: remember(importance=2.5)),
        (V, "importance", lambda: remember(importance=None)),
        (V, "tags", lambda: remember(tags="travel")),
        (V, "tags", lambda: remember(tags=[1])),
        (V, "tags", lambda: remember(tags=["a,b"])),
        (V, "tags", lambda: remember(tags=["t" * 65])),
        (V, "tags", lambda: remember(tags=[f"t{n}" for n in range(21)])),
        (V, "sender_id", lambda: remember(sender_id="s" * 256)),
        (V, "sender_name", lambda: remember(sender_name=["Alice"])),
        (V, "timestamp", lambda: remember(timestamp="2025-01-01")),
        (V, "source", lambda: remember(source="elsewhere")),
        # recall
        (V, "query", lambda: retrieval.recall(keys, "")),
        (V, "query", lambda: retrieval.recall(keys, "q" * 2001)),
        (V, "top_k", lambda: retrieval.recall(keys, "fine", top_k=0)),
        (V, "top_k", lambda: retrieval.recall(keys, "fine", top_k=51)),
        (V, "top_k", lambda: retrieval.recall(keys, "fine", top_k="5")),
        (V, "top_k", lambda: retrieval.recall(keys, "fine", top_k=True)),
        (V, "statuses", lambda: retrieval.recall(keys, "fine", statuses=["deleted"])),
        (V, "statuses", lambda: retrieval.recall(keys, "fine", statuses="active")),
        (V, "importance_min", lambda: retrieval.recall(keys, "fine", importance_min=9)),
        (V, "time_after", lambda: retrieval.recall(keys, "fine", time_after="yesterday")),
        (V, "tags", lambda: retrieval.recall(keys, "fine", tags="travel")),
        # list_episodes
        (V, "statuses", lambda: episodes.list_episodes(keys, statuses=["bogus"])),
        (V, "cursor", lambda: episodes.list_episodes(keys, cursor="x12")),
        (V, "cursor", lambda: episodes.list_episodes(keys, cursor="a")),
        (V, "cursor", lambda: episodes.list_episodes(keys, cursor=12)),
        (V, "limit", lambda: episodes.list_episodes(keys, limit=0)),
        (V, "limit", lambda: episodes.list_episodes(keys, limit=201)),
        (V, "limit", lambda: episodes.list_episodes(keys, limit="25")),
        (V, "importance_min", lambda: episodes.list_episodes(keys, importance_min=0)),
        # get / archive / restore / delete: unknown ids, unknown scope
        (N, None, lambda: episodes.get_episode(keys, "ffffffffffff")),
        (N, None, lambda: episodes.get_episode(UNKNOWN, episode_id)),
        (N, None, lambda: episodes.archive(UNKNOWN, system, [episode_id])),
        (N, None, lambda: episodes.archive(keys, system, [episode_id, "ffffffffffff"])),
        (N, None, lambda: episodes.restore(UNKNOWN, system, [episode_id])),
        (N, None, lambda: episodes.delete(UNKNOWN, system, [episode_id])),
        (N, None, lambda: episodes.delete(keys, system, [episode_id, "ffffffffffff"])),
        (V, "episode_ids", lambda: episodes.archive(keys, system, [])),
        (V, "episode_ids", lambda: episodes.delete(keys, system, [])),
        # profiles
        (V, "name", lambda: profiles.update_profile(keys, system, "speaker", "u1", name="n" * 101)),
        (V, "traits", lambda: profiles.update_profile(keys, system, "speaker", "u1", add_traits="kind")),
        (V, "traits", lambda: profiles.update_profile(keys, system, "session", add_traits=[""])),
        (V, "traits", lambda: profiles.update_profile(keys, system, "session", add_traits=["t" * 201])),
        (V, "type", lambda: profiles.update_profile(keys, system, "group", notes="x")),
        (V, "sender_id", lambda: profiles.update_profile(keys, system, "speaker", "", notes="x")),
        (
            V,
            "traits",
            lambda: profiles.replace_profile(keys, system, "session", "", {"traits": [f"t{n}" for n in range(21)]}),
        ),
        (
            V,
            "preferences",
            lambda: profiles.replace_profile(
                keys, system, "session", "", {"preferences": [f"p{n}" for n in range(11)]}
            ),
        ),
        (V, "notes", lambda: profiles.replace_profile(keys, system, "session", "", {"notes": "n" * 2001})),
        (V, "profile", lambda: profiles.replace_profile(keys, system, "session", "", ["not", "a", "dict"])),
        (N, None, lambda: profiles.rollback_profile(keys, system, "speaker", "u1", 99)),
        (N, None, lambda: profiles.rollback_profile(keys, system, "speaker", "u1", "1")),
        (N, None, lambda: profiles.rollback_profile(keys, system, "speaker", "u1", True)),
        (N, None, lambda: profiles.rollback_profile(UNKNOWN, system, "speaker", "u1", 1)),
        (N, None, lambda: profiles.rollback_profile(keys, system, "speaker", "nobody", 1)),
        # record_injection
        (V, "query", lambda: injection.record_injection(keys, system, "")),
        (V, "top_k", lambda: injection.record_injection(keys, system, "fine", top_k=0)),
        (V, "query_id", lambda: injection.record_injection(keys, system, "fine", query_id="q" * 256)),
        (V, "sender_id", lambda: injection.record_injection(keys, system, "fine", sender_id=7)),
    ]


def test_it_refuses_bad_input_to_every_operation_and_changes_nothing(seeded, keys, system, counts):
    before = counts()
    profile_before = profiles.get_profile(keys, "speaker", "u1")[0]
    calls = _bad_calls(keys, system, seeded.episode_id)
    for error, field, call in calls:
        with pytest.raises(error) as caught:
            call()
        if field is not None:
            assert caught.value.field == field, (field, caught.value.message)
            assert caught.value.message
        assert counts() == before, field
    assert profiles.get_profile(keys, "speaker", "u1")[0] == profile_before
    seeded.refresh_from_db()
    assert (seeded.status, seeded.content) == ("active", "A perfectly fine memory")


def test_it_names_the_limit_in_the_message(seeded, keys, system):
    with pytest.raises(ValidationError, match="200 characters"):
        episodes.remember(keys, system, "x" * 201)
    with pytest.raises(ValidationError, match="at most 20 traits"):
        profiles.replace_profile(keys, system, "speaker", "u1", {"traits": [f"t{n}" for n in range(21)]})
    with pytest.raises(ValidationError, match="2000 characters"):
        profiles.replace_profile(keys, system, "speaker", "u1", {"notes": "n" * 2001})
    with pytest.raises(ValidationError, match="1 to 50"):
        retrieval.recall(keys, "fine", top_k=51)
    with pytest.raises(ValidationError, match="unknown status 'deleted'"):
        retrieval.recall(keys, "fine", statuses=["deleted"])


def test_it_accepts_content_of_exactly_the_limit(seeded, keys, system):
    assert len(episodes.remember(keys, system, "x" * 200).episode.content) == 200


def test_it_reports_a_missing_id_in_a_batch_without_touching_the_others(seeded, keys, system):
    with pytest.raises(NotFound):
        episodes.archive(keys, system, [seeded.episode_id, "ffffffffffff"])
    seeded.refresh_from_db()
    assert seeded.status == "active"


@pytest.mark.parametrize("cursor", ["a²", "b٣", "a" + "9" * 19, "a" + "9" * 5000, "a 1", "a1\n", "A1"])
def test_it_refuses_a_page_cursor_that_is_not_a_letter_and_a_plain_id(keys, cursor):
    with pytest.raises(ValidationError) as caught:
        episodes.list_episodes(keys, cursor=cursor)
    assert caught.value.field == "cursor"


@pytest.mark.parametrize(
    ("name", "value"),
    [("time_after", "9999-12-31T23:00:00-05:00"), ("time_before", "0001-01-01T00:10:00+01:00")],
)
def test_it_refuses_a_time_with_no_utc_time_in_every_operation(seeded, keys, system, counts, name, value):
    stamp = datetime.fromisoformat(value)
    with pytest.raises(ValidationError) as caught:
        episodes.list_episodes(keys, **{name: stamp})
    assert caught.value.field == name
    with pytest.raises(ValidationError) as caught:
        retrieval.recall(keys, "fine", **{name: stamp})
    assert caught.value.field == name
    before = counts()
    with pytest.raises(ValidationError) as caught:
        episodes.remember(keys, system, "a memory from no time", timestamp=stamp)
    assert caught.value.field == "timestamp"
    assert counts() == before


def test_it_takes_only_twelve_hex_digits_as_an_episode_id() -> None:
    assert validation.is_episode_id("0123456789ab")
    assert not validation.is_episode_id("0123456789ab\n")  # `$` alone would let a trailing newline in
    assert not validation.is_episode_id("0123456789AB")
    assert not validation.is_episode_id(123456789012)
