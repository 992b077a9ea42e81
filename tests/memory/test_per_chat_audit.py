"""Audit entries belong to the chat they were written in (issue 15): under `bot` isolation two chats
of one bot share their episodes (one user_key), but a chat's audit list and its exports hold only
that chat's entries (scope_key), while an episode's own history shows every entry about it."""

from __future__ import annotations

import json

import pytest

from memconsole.memory import episodes, exports, injection, profiles, queries
from memconsole.memory.scopes import derive_scope

pytestmark = pytest.mark.django_db


@pytest.fixture
def chats(system):
    """Chats A and B of bot-a under bot isolation: A remembers, edits its profile and injects."""
    chat_a = derive_scope("bot-a", "group_1", "bot")
    chat_b = derive_scope("bot-a", "group_2", "bot")
    assert chat_a.user_key == chat_b.user_key
    episode = episodes.remember(chat_a, system, "Chat A plans a trip to Lisbon", sender_id="u1", sender_name="Ann")
    profiles.update_profile(chat_a, system, "session", name="Chat A secret club", add_traits=["private"])
    injection.record_injection(chat_a, system, "Lisbon", sender_id="u1", sender_name="Ann", top_k=3)
    episodes.remember(chat_b, system, "Chat B likes tea", sender_id="u2", sender_name="Bea")
    return {"a": chat_a, "b": chat_b, "episode": episode.episode}


def _operations(entries) -> set[str]:
    return {entry.operation for entry in entries}


def test_it_lists_only_the_chats_own_entries(chats):
    chat_b = list(queries.scope_audit_entries(chats["b"]))
    assert chat_b and {entry.scope_key for entry in chat_b} == {chats["b"].scope_key}
    assert "profile_update" not in _operations(chat_b) and "inject" not in _operations(chat_b)
    chat_a = queries.scope_audit_entries(chats["a"])
    assert {"remember", "inject"} <= _operations(chat_a)
    assert {entry.scope_key for entry in chat_a} == {chats["a"].scope_key}


def test_it_pages_only_the_chats_own_entries(chats):
    page = queries.audit_page(chats["b"], None, 50)
    assert page.items and {entry.scope_key for entry in page.items} == {chats["b"].scope_key}


def test_it_keeps_every_entry_about_an_episode_in_its_history(chats, system):
    episode_id = chats["episode"].episode_id
    episodes.archive(chats["b"], system, [episode_id])  # archived from the other chat
    history = queries.episode_history(chats["b"], episode_id, 10)
    assert {"remember", "archive"} <= _operations(history)


def test_it_exports_only_the_chats_own_entries(chats, system):
    scope_export = json.loads("".join(exports.stream_scope_export(chats["b"], system, include_audit=True)))
    audit_export = json.loads("".join(exports.stream_audit_export(chats["b"], system)))
    for document in (scope_export["audit"], audit_export):
        assert {entry["scope_key"] for entry in document["entries"]} == {chats["b"].scope_key}
        text = json.dumps(document, ensure_ascii=False)
        assert "Chat A secret club" not in text and "Lisbon" not in text
        assert document["count"] == len(document["entries"])
