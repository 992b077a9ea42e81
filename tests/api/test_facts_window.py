"""Issue 20: keyed facts and the conversation window over the API (a bot-memory-style bot)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from cryptography.fernet import Fernet
from django.utils import timezone

from memconsole.memory.audit import Actor
from memconsole.memory.botmemory_models import Fact, FactVersion, WindowMessage
from memconsole.memory.models import AuditEntry
from memconsole.memory.window import set_window_size

from .conftest import SCOPE_A

pytestmark = pytest.mark.django_db

OTHER_CHAT = {**SCOPE_A, "session_name": "group_101"}


def fact(api, subject, key, value, scope=SCOPE_A):
    response = api.post("facts", {**scope, "subject": subject, "key": key, "value": value})
    assert response.status_code == 200, response.content
    return response.json()


def read(api, scope=SCOPE_A, **params):
    response = api.get("facts", {**scope, **params})
    assert response.status_code == 200, response.content
    return {f["key"]: f["value"] for f in response.json()["facts"]}


def test_it_upserts_one_fact_per_subject_and_key_and_keeps_its_history(api):
    assert fact(api, "u1", "city", "Paris")["version"] == 1
    moved = fact(api, "u1", "city", "Berlin")
    assert moved["value"] == "Berlin" and moved["version"] == 2
    fact(api, "u1", "food", "dumplings")
    fact(api, "u2", "city", "Oslo")

    assert read(api, subject="u1") == {"city": "Berlin", "food": "dumplings"}
    assert read(api, subject="u1", key="city") == {"city": "Berlin"}
    assert Fact.objects.count() == 3
    assert [v.text for v in FactVersion.objects.all()] == ["Paris"]
    assert AuditEntry.objects.filter(operation="fact_remember").count() == 4
    assert fact(api, "u1", "city", "Berlin")["version"] == 2  # the same value: nothing new


def test_it_forgets_one_fact(api):
    fact(api, "u1", "city", "Paris")
    fact(api, "u1", "food", "tea")
    assert api.post("facts/forget", {**SCOPE_A, "subject": "u1", "key": "city"}).json() == {"forgotten": True}
    assert read(api, subject="u1") == {"food": "tea"}
    assert api.post("facts/forget", {**SCOPE_A, "subject": "u1", "key": "city"}).status_code == 404
    entry = AuditEntry.objects.get(operation="fact_forget")
    assert entry.sender_id == "u1" and entry.payload["before"]["value"] == "Paris"


def test_facts_never_leave_their_space(api, api_b):
    fact(api, "u1", "city", "Paris")
    assert read(api, OTHER_CHAT, subject="u1") == {}  # another chat (session isolation)
    bot_wide = {**SCOPE_A, "isolation": "bot"}
    fact(api, "u1", "city", "Rome", scope=bot_wide)
    assert read(api, {**OTHER_CHAT, "isolation": "bot"}, subject="u1") == {"city": "Rome"}  # the bot's space
    assert read(api, subject="u1") == {"city": "Paris"}
    assert api_b.get("facts", {**SCOPE_A, "subject": "u1"}).status_code == 403
    assert api_b.post("facts", {**SCOPE_A, "subject": "u1", "key": "k", "value": "v"}).status_code == 403


@pytest.mark.parametrize(
    ("body", "status", "field"),
    [
        ({"subject": "u1", "key": "k"}, 422, "value"),
        ({"subject": "", "key": "k", "value": "v"}, 422, "subject"),
        ({"subject": "u1", "key": "k", "value": 3}, 400, "value"),
        ({"subject": "u1", "key": "k", "value": "v" * 2001}, 422, "value"),
        ({"subject": "u1", "key": "k", "value": "v", "extra": 1}, 400, "extra"),
    ],
)
def test_it_refuses_a_bad_fact(api, body, status, field):
    response = api.post("facts", {**SCOPE_A, **body})
    assert response.status_code == status, response.content
    assert response.json()["error"]["field"] == field


def test_fact_values_are_sealed(api, settings):
    settings.MEMCONSOLE_FERNET_KEYS = [Fernet.generate_key().decode()]
    fact(api, "u1", "card", "4111 1111")
    fact(api, "u1", "card", "5500 0000")
    for row in [*Fact.objects.all(), *FactVersion.objects.all()]:
        assert row.encrypted and "1111" not in row.text_stored and "5500" not in row.text_stored
    assert read(api, subject="u1") == {"card": "5500 0000"}


# --- the window ---------------------------------------------------------------------------------


def say(api, role, content, scope=SCOPE_A, **fields):
    response = api.post("messages", {**scope, "role": role, "content": content, **fields})
    assert response.status_code == 201, response.content
    return response.json()


def test_it_keeps_the_last_n_messages_oldest_first(api):
    for n in range(25):
        say(api, "user" if n % 2 == 0 else "assistant", f"message {n}", sender_id="u1" if n % 2 == 0 else "")
    answer = api.get("messages", SCOPE_A).json()
    assert answer["window_size"] == 20
    assert [m["content"] for m in answer["messages"]] == [f"message {n}" for n in range(5, 25)]
    assert WindowMessage.objects.count() == 20  # older messages dropped out
    last = api.get("messages", {**SCOPE_A, "limit": "3"}).json()["messages"]
    assert [(m["role"], m["content"]) for m in last] == [
        ("user", "message 22"),
        ("assistant", "message 23"),
        ("user", "message 24"),
    ]


def test_a_message_older_than_a_full_window_is_refused_not_dropped_as_written(api):
    """Found by probing: it answered 201 and the message was gone at once."""
    set_window_size(Actor.system("tests"), "bot-a", 3)
    for n in range(3):
        say(api, "user", f"m{n}")
    an_hour_ago = (timezone.now() - timedelta(hours=1)).isoformat()

    response = api.post("messages", {**SCOPE_A, "role": "user", "content": "late", "created_at": an_hour_ago})

    assert response.status_code == 422 and response.json()["error"]["field"] == "created_at"
    assert "older than every message the window keeps" in response.json()["error"]["message"]
    assert [m["content"] for m in api.get("messages", SCOPE_A).json()["messages"]] == ["m0", "m1", "m2"]


def test_the_window_size_is_a_per_bot_setting(api):
    set_window_size(Actor.system("tests"), "bot-a", 3)
    for n in range(5):
        say(api, "user", f"m{n}")
    answer = api.get("messages", SCOPE_A).json()
    assert answer["window_size"] == 3 and [m["content"] for m in answer["messages"]] == ["m2", "m3", "m4"]
    assert AuditEntry.objects.filter(operation="window_size").count() == 1


def test_messages_never_leave_their_chat(api, api_b):
    say(api, "user", "in group_100")
    say(api, "user", "in group_101", scope=OTHER_CHAT)
    bot_wide = {**SCOPE_A, "isolation": "bot"}
    assert [m["content"] for m in api.get("messages", bot_wide).json()["messages"]] == ["in group_100"]
    assert [m["content"] for m in api.get("messages", OTHER_CHAT).json()["messages"]] == ["in group_101"]
    assert api_b.get("messages", SCOPE_A).status_code == 403


@pytest.mark.parametrize(
    ("body", "status", "field"),
    [
        ({"role": "narrator", "content": "x"}, 422, "role"),
        ({"role": 1, "content": "x"}, 400, "role"),
        ({"role": "user", "content": ""}, 422, "content"),
        ({"role": "user"}, 422, "content"),
    ],
)
def test_it_refuses_a_bad_message(api, body, status, field):
    response = api.post("messages", {**SCOPE_A, **body})
    assert response.status_code == status, response.content
    assert response.json()["error"]["field"] == field
    if status == 400:  # worded as every wrong type is
        assert response.json()["error"]["message"] == f"{field}: must be a string"


def test_message_contents_are_sealed(api, settings):
    settings.MEMCONSOLE_FERNET_KEYS = [Fernet.generate_key().decode()]
    say(api, "user", "my password is hunter2")
    row = WindowMessage.objects.get()
    assert row.encrypted and "hunter2" not in row.text_stored


def test_old_messages_fall_out_by_retention(api, settings):
    settings.MEMCONSOLE_WINDOW_RETENTION_DAYS = 0  # kept for good, until retention is turned on
    say(api, "user", "long ago", created_at="2020-01-01T00:00:00Z")
    settings.MEMCONSOLE_WINDOW_RETENTION_DAYS = 30
    say(api, "user", "today")
    assert [m["content"] for m in api.get("messages", SCOPE_A).json()["messages"]] == ["today"]


@pytest.mark.parametrize(
    ("created_at", "reason"),
    [("2020-01-01T00:00:00Z", "older than the window keeps messages (30 days)"), ("9999-01-01T00:00:00Z", "future")],
)
def test_a_message_the_window_would_not_keep_as_sent_is_refused(api, settings, created_at, reason):
    settings.MEMCONSOLE_WINDOW_RETENTION_DAYS = 30
    say(api, "user", "now")
    refused = api.post("messages", {**SCOPE_A, "role": "user", "content": "odd", "created_at": created_at})
    assert refused.status_code == 422 and reason in refused.json()["error"]["message"], refused.content
    assert refused.json()["error"]["field"] == "created_at"
    assert [m["content"] for m in api.get("messages", SCOPE_A).json()["messages"]] == ["now"]


def test_inject_brings_the_speakers_facts_and_on_request_the_window(api):
    fact(api, "u1", "city", "Berlin")
    fact(api, "u2", "city", "Oslo")
    say(api, "user", "hello", sender_id="u1")
    say(api, "assistant", "hi!")
    body = {**SCOPE_A, "query": "where do I live?", "sender_id": "u1", "sender_name": "Alice"}

    plain = api.post("inject", body).json()
    assert plain["context"]["speaker_profile"]["facts"] == {"city": "Berlin"}
    assert any("Facts: city: Berlin" in block for block in plain["system_blocks"])
    assert not any("Oslo" in block for block in plain["system_blocks"])
    assert plain["context"]["history"] is None

    with_window = api.post("inject", {**body, "include_window": True}).json()
    assert [(m["role"], m["content"]) for m in with_window["context"]["history"]] == [
        ("user", "hello"),
        ("assistant", "hi!"),
    ]


def test_a_message_past_retention_is_not_served_even_before_the_next_one(api, settings):
    settings.MEMCONSOLE_WINDOW_RETENTION_DAYS = 0
    say(api, "user", "long ago", created_at="2020-01-01T00:00:00Z")
    say(api, "user", "recent")
    settings.MEMCONSOLE_WINDOW_RETENTION_DAYS = 30  # an idle chat: no new message drops the old one
    assert [m["content"] for m in api.get("messages", SCOPE_A).json()["messages"]] == ["recent"]
    body = api.post("inject", {**SCOPE_A, "query": "hello", "include_window": True}).json()
    assert [m["content"] for m in body["context"]["history"]] == ["recent"]
