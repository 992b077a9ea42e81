"""Issue 20 in the console: a speaker's facts on their profile page, a chat's conversation window."""

from __future__ import annotations

import pytest

from memconsole.memory import facts, window
from memconsole.memory.scopes import derive_scope

pytestmark = pytest.mark.django_db


def test_a_speakers_facts_show_on_their_profile_page(viewer_client, url, light_scope, keys, system):
    facts.remember_fact(keys, system, "u1", "city", "Paris")
    facts.remember_fact(keys, system, "u1", "city", "Berlin")
    facts.remember_fact(keys, system, "u2", "city", "<b>Oslo</b>")
    facts.remember_fact(derive_scope("bot-a", "group_999"), system, "u1", "pet", "a cat")  # another space
    page = viewer_client.get(url("profile_detail", light_scope.pk, "speaker"), {"sender": "u1"}).content.decode()
    assert 'id="facts-heading"' in page and '<th scope="row">city</th><td>Berlin</td><td>2</td>' in page
    assert "Oslo" not in page and "a cat" not in page
    other = viewer_client.get(url("profile_detail", light_scope.pk, "speaker"), {"sender": "u2"}).content.decode()
    assert "&lt;b&gt;Oslo&lt;/b&gt;" in other  # escaped


def test_a_chats_conversation_shows_on_its_session_profile(viewer_client, url, light_scope, keys, system):
    window.append_message(keys, system, "user", "hello there", sender_id="u1", sender_name="Alice")
    window.append_message(keys, system, "assistant", "hi Alice")
    window.append_message(derive_scope("bot-a", "group_999"), system, "user", "another chat")
    page = viewer_client.get(url("profile_detail", light_scope.pk, "session")).content.decode()
    assert page.index("hello there") < page.index("hi Alice") and "<strong>Alice</strong>" in page
    assert "another chat" not in page
    assert 'id="facts-heading"' not in page


def test_an_empty_window_and_no_facts_say_so(viewer_client, url, light_scope):
    session = viewer_client.get(url("profile_detail", light_scope.pk, "session")).content.decode()
    assert "No messages in this chat" in session
    speaker = viewer_client.get(url("profile_detail", light_scope.pk, "speaker"), {"sender": "u1"}).content.decode()
    assert "No facts about this speaker yet." in speaker
