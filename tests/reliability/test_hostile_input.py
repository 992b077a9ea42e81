"""Hostile input: property tests over the domain operations and the bot API, and hostile imports.

Values come from tests/reliability/hostile.py: random unicode (lone surrogates included), huge
strings, NUL, SQL, LIKE wildcards, Chroma filter operators as strings and as objects where a string
is expected, NaN/Infinity, huge and negative numbers, deep nesting, template syntax, HTML.
The rule in every case: a clear refusal (ValidationError / NotFound, or a 4xx with a JSON error)
and nothing written, or, when the value is legal, exactly that value stored and nothing else
touched. Reads never write and never return another scope's data. tests/api/test_fuzz.py fuzzes
the API for 5xx and schema conformance; here the point is what gets written.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from datetime import UTC, datetime

import pytest
from django.test import Client
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from memconsole.memory import episodes, injection, profiles, retrieval, tokens, validation
from memconsole.memory.audit import Actor, verify_audit_chain
from memconsole.memory.episodes import remember
from memconsole.memory.errors import NotFound, ValidationError
from memconsole.memory.models import AuditEntry, Episode

from .conftest import record_figure
from .hostile import anything, hostile_text, json_hostile, rows, scope_fingerprint

pytestmark = pytest.mark.django_db

PROPERTY = {
    "deadline": None,
    "derandomize": True,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
}
REFUSED = (ValidationError, NotFound)


@pytest.fixture
def other_scope(other_keys, system):
    """bot-b/group_200 with an episode and a profile: nothing done elsewhere may touch it."""
    episodes.remember(other_keys, system, "the other scope's secret", tags=["secret"], sender_id="u9")
    profiles.update_profile(other_keys, system, "speaker", "u9", name="Zed", add_traits=["private"])
    return scope_fingerprint(other_keys.user_key, other_keys.scope_key)


def draw_fields(
    data: st.DataObject, legal: dict[str, st.SearchStrategy], hostile: dict[str, st.SearchStrategy]
) -> dict:
    """Up to two fields drawn from their hostile strategy, the others from the legal-typed one (so
    that an example is not refused for one field before the others are looked at)."""
    names = data.draw(st.lists(st.sampled_from(sorted(hostile)), max_size=2, unique=True), label="hostile fields")
    return {name: data.draw(hostile[name] if name in names else legal[name], label=name) for name in legal}


def tried(counter: Counter, outcome: str) -> None:
    counter[outcome] += 1


# --- domain operations --------------------------------------------------------------------------


def test_it_stores_exactly_what_remember_accepts_and_nothing_it_refuses(keys, other_keys, system, other_scope):
    outcomes: Counter[str] = Counter()

    legal = {
        "content": hostile_text,
        "tags": st.lists(hostile_text, max_size=4),
        "importance": st.integers(min_value=1, max_value=5),
        "sender_id": hostile_text,
        "sender_name": hostile_text,
        "timestamp": st.none() | st.datetimes(timezones=st.just(UTC)),
    }
    hostile = {
        "content": anything,
        "tags": anything,
        "importance": st.integers() | anything,
        "sender_id": anything,
        "sender_name": anything,
        "timestamp": st.datetimes() | anything,
    }

    @hypothesis_settings(max_examples=70, **PROPERTY)
    @given(data=st.data())
    def check(data):
        fields = draw_fields(data, legal, hostile)
        content, tags, importance = fields["content"], fields["tags"], fields["importance"]
        sender_id, sender_name, timestamp = fields["sender_id"], fields["sender_name"], fields["timestamp"]
        before = rows()
        try:
            result = episodes.remember(
                keys,
                system,
                content,
                tags=tags,
                importance=importance,
                sender_id=sender_id,
                sender_name=sender_name,
                timestamp=timestamp,
            )
        except REFUSED:
            assert rows() == before
            return tried(outcomes, "refused")
        stored = Episode.objects.get(episode_id=result.episode.episode_id)
        assert stored.user_key == keys.user_key
        # Byte for byte but for the surrounding white space remember trims (issue 14), and a speaker's
        # invisible characters at its ends: no escaping or truncation. An importance outside 1-5 is
        # stored clamped, not refused (issue 14).
        assert stored.content == content.strip()
        clamped = min(5, max(1, importance))
        speaker = (validation.validate_speaker(sender_id), validation.validate_speaker(sender_name, "sender_name"))
        assert (stored.sender_id, stored.sender_name, stored.importance) == (*speaker, clamped)
        assert stored.tags == validation.validate_tags(tags)
        after = rows()
        assert after["Episode"] == before["Episode"] + 1 and after["AuditEntry"] == before["AuditEntry"] + 1
        tried(outcomes, "stored")

    check()
    assert scope_fingerprint(other_keys.user_key, other_keys.scope_key) == other_scope
    assert verify_audit_chain().ok
    assert outcomes["refused"] and outcomes["stored"], outcomes
    record_figure("hostile_input", "domain_remember", dict(outcomes))


def test_it_never_writes_or_leaks_on_hostile_reads_and_filters(keys, other_keys, system, other_scope):
    for i, text in enumerate(["%", "_", "$ne", "' OR '1'='1", "<b>bold</b>", "plain"]):
        episodes.remember(keys, system, f"episode {i} says {text}", tags=[text, "t"], sender_id=text)
    outcomes: Counter[str] = Counter()

    legal = {
        "query": hostile_text,
        "sender_id": st.none() | hostile_text,
        "tag": st.none() | hostile_text,
        "statuses": st.none() | st.lists(st.sampled_from(["active", "archived", "superseded"]), min_size=1),
        "importance_min": st.none() | st.integers(min_value=1, max_value=5),
        "cursor": st.none(),
        "top_k": st.integers(min_value=1, max_value=50),
    }
    hostile = {
        "query": anything,
        "sender_id": anything,
        "tag": anything,
        "statuses": st.lists(st.sampled_from(["$ne", "%", "deleted", ""])) | anything,
        "importance_min": st.integers() | anything,
        "cursor": hostile_text | anything,
        "top_k": st.integers() | anything,
    }

    @hypothesis_settings(max_examples=80, **PROPERTY)
    @given(data=st.data(), use_recall=st.booleans())
    def check(data, use_recall):
        fields = draw_fields(data, legal, hostile)
        query, sender_id, tag, statuses = fields["query"], fields["sender_id"], fields["tag"], fields["statuses"]
        importance_min, cursor, top_k = fields["importance_min"], fields["cursor"], fields["top_k"]
        before = rows()
        try:
            if use_recall:
                found = [
                    hit.episode
                    for hit in retrieval.recall(
                        keys,
                        query,
                        top_k=top_k,
                        sender_id=sender_id,
                        tags=[tag] if tag is not None else None,
                        statuses=statuses,
                        importance_min=importance_min,
                    )
                ]
            else:
                found = episodes.list_episodes(
                    keys, cursor=cursor, sender_id=sender_id, tag=tag, statuses=statuses, importance_min=importance_min
                ).episodes
        except REFUSED:
            tried(outcomes, "refused")
        else:
            tried(outcomes, "answered")
            for episode in found:
                assert episode.user_key == keys.user_key
                if sender_id:  # an exact match, never a pattern or an operator
                    assert episode.sender_id == sender_id
                if (
                    tag and isinstance(tag, str) and validation.trimmed(tag)
                ):  # invisible characters only is no tag, as spaces
                    assert validation.trimmed(tag) in episode.tags, (tag, episode.tags)
        assert rows() == before  # reads write nothing

    check()
    assert scope_fingerprint(other_keys.user_key, other_keys.scope_key) == other_scope
    assert outcomes["refused"] and outcomes["answered"], outcomes
    record_figure("hostile_input", "domain_reads", dict(outcomes))


def test_it_refuses_hostile_ids_and_profile_values_without_changing_anything(keys, other_keys, system, other_scope):
    episode = episodes.remember(keys, system, "a plain fact", sender_id="u1").episode
    profiles.update_profile(keys, system, "speaker", "u1", name="Alice", add_traits=["kind"])
    outcomes: Counter[str] = Counter()

    @hypothesis_settings(max_examples=80, **PROPERTY)
    @given(
        operation=st.sampled_from(["archive", "restore", "delete", "get", "update", "replace", "rollback"]),
        value=anything,
        other=st.one_of(hostile_text, anything),
    )
    def check(operation, value, other):
        before = rows()
        own = scope_fingerprint(keys.user_key, keys.scope_key)
        try:
            if operation in ("archive", "restore", "delete"):
                getattr(episodes, operation)(keys, system, value if isinstance(value, list) else [value])
            elif operation == "get":
                episodes.get_episode(keys, value)
            elif operation == "update":
                profiles.update_profile(keys, system, "speaker", other, name=value, add_traits=[value], notes=value)
            elif operation == "replace":
                profiles.replace_profile(
                    keys, system, "speaker", "u1", {"name": value, "traits": [other], "notes": other}
                )
            else:
                profiles.rollback_profile(keys, system, "speaker", other, value)
        except REFUSED:
            assert rows() == before
            assert scope_fingerprint(keys.user_key, keys.scope_key) == own
            return tried(outcomes, "refused")
        tried(outcomes, "accepted")
        if operation in ("update", "replace"):  # a legal value: stored as given
            data, _ = profiles.get_profile(keys, "speaker", other if operation == "update" else "u1")
            assert data["name"] == value.strip()

    check()
    assert Episode.objects.filter(episode_id=episode.episode_id).exists()
    assert scope_fingerprint(other_keys.user_key, other_keys.scope_key) == other_scope
    assert verify_audit_chain().ok
    record_figure("hostile_input", "domain_ids_and_profiles", dict(outcomes))


# --- the bot API --------------------------------------------------------------------------------

SCOPE = {"bot_uuid": "bot-a", "session_name": "group_100"}
VALID = {
    "remember": {**SCOPE, "content": "Alice lives in Paris", "sender_id": "u1", "tags": ["home"], "importance": 3},
    "recall": {**SCOPE, "query": "where does Alice live", "top_k": 3},
    "profile": {**SCOPE, "type": "speaker", "sender_id": "u1", "add_traits": ["kind"], "set": {"name": "Alice"}},
    "forget": {**SCOPE, "episode_id": "0123456789ab"},
    "inject": {**SCOPE, "query": "where does Alice live", "sender_id": "u1"},
}
FIELDS = {
    "remember": [
        "bot_uuid",
        "session_name",
        "isolation",
        "content",
        "tags",
        "importance",
        "sender_id",
        "sender_name",
        "timestamp",
    ],
    "recall": [
        "bot_uuid",
        "session_name",
        "isolation",
        "query",
        "top_k",
        "sender_id",
        "importance_min",
        "time_after",
        "tags",
        "statuses",
    ],
    "profile": ["bot_uuid", "session_name", "type", "sender_id", "set", "add_traits", "remove_traits"],
    "forget": ["bot_uuid", "session_name", "episode_id"],
    "inject": ["bot_uuid", "session_name", "query", "query_id", "sender_id", "sender_name", "top_k"],
}


def encode(body: dict) -> str:
    """JSON as a careless client writes it: NaN/Infinity literals included (allow_nan)."""
    try:
        return json.dumps(body, ensure_ascii=False)
    except UnicodeEncodeError:  # never reached: lone surrogates are written as \\ud800 escapes
        return json.dumps(body)


def test_it_answers_hostile_api_bodies_with_a_clear_4xx_and_writes_nothing(
    keys, system, other_keys, other_scope, settings
):
    settings.MEMCONSOLE_API_RATE_PER_MINUTE = 10**6
    _, secret = tokens.create_token("bot a", ["bot-a"], Actor.system("tests"))
    client = Client()
    remember(keys, system, "Alice lives in Paris", sender_id="u1")
    statuses: Counter[int] = Counter()

    @hypothesis_settings(max_examples=120, **PROPERTY)
    @given(
        endpoint=st.sampled_from(sorted(VALID)),
        data=st.data(),
    )
    def check(endpoint, data):
        names = data.draw(
            st.lists(st.sampled_from(FIELDS[endpoint] + ["$where", "__proto__"]), min_size=1, max_size=2, unique=True)
        )
        # Hostile text where the API takes text (often legal: then it must be stored exactly), or anything at all.
        value = st.one_of(hostile_text.filter(lambda v: len(v) < 20_000), json_hostile)
        body = {**VALID[endpoint], **{name: data.draw(value, label=name) for name in names}}
        before = rows()
        response = client.post(
            f"/api/v1/{endpoint}",
            data=encode(body),
            content_type="application/json",
            headers={"Authorization": f"Bearer {secret}"},
        )
        statuses[response.status_code] += 1
        assert response.status_code in {200, 201, 400, 403, 404, 413, 422}, response.content[:300]
        answer = response.json()
        if response.status_code >= 400:
            assert set(answer) == {"error"} and answer["error"]["message"]
            assert rows() == before, (endpoint, body, answer)  # refused: nothing written
            return
        if endpoint == "remember":
            stored = Episode.objects.get(episode_id=answer["episode_id"])
            assert stored.content == body["content"] and stored.bot_uuid == "bot-a"
        if endpoint in ("recall", "inject"):
            episodes = answer["episodes"] if endpoint == "recall" else answer["context"]["episodes"]
            for hit in episodes:  # never the other bot's data, whatever the filters said
                assert Episode.objects.get(episode_id=hit["episode_id"]).bot_uuid == "bot-a"

    check()
    assert scope_fingerprint(other_keys.user_key, other_keys.scope_key) == other_scope
    assert verify_audit_chain().ok
    assert statuses[400] and statuses[422], statuses
    record_figure("hostile_input", "api_bodies", {str(k): v for k, v in sorted(statuses.items())})


@pytest.mark.parametrize(
    ("name", "raw"),
    [
        ("NaN literal", '{"bot_uuid": "bot-a", "session_name": "g_1", "content": "x", "importance": NaN}'),
        ("Infinity literal", '{"bot_uuid": "bot-a", "session_name": "g_1", "content": "x", "importance": Infinity}'),
        ("overflowing float", '{"bot_uuid": "bot-a", "session_name": "g_1", "content": "x", "importance": 1e999}'),
        (
            "huge integer",
            '{"bot_uuid": "bot-a", "session_name": "g_1", "content": "x", "importance": ' + "9" * 5000 + "}",
        ),
        # A negative importance is stored clamped to 1 (issue 14); a fractional one is still refused.
        ("fractional importance", '{"bot_uuid": "bot-a", "session_name": "g_1", "content": "x", "importance": 2.5}'),
        (
            "deep nesting",
            '{"bot_uuid": "bot-a", "session_name": "g_1", "content": ' + "[" * 50_000 + "]" * 50_000 + "}",
        ),
        ("operator as bot_uuid", '{"bot_uuid": {"$ne": ""}, "session_name": "g_1", "content": "x"}'),
        ("operator as content", '{"bot_uuid": "bot-a", "session_name": "g_1", "content": {"$gt": ""}}'),
        ("operator as tag", '{"bot_uuid": "bot-a", "session_name": "g_1", "content": "x", "tags": [{"$gt": ""}]}'),
        ("lone surrogate", '{"bot_uuid": "bot-a", "session_name": "g_1", "content": "\\ud800"}'),
        ("NUL", '{"bot_uuid": "bot-a", "session_name": "g_1", "content": "a\\u0000b"}'),
        ("another bot", '{"bot_uuid": "bot-b", "session_name": "g_1", "content": "x"}'),
        ("over the body limit", '{"bot_uuid": "bot-a", "session_name": "g_1", "content": "' + "x" * 300_000 + '"}'),
        ("top-level array", '[{"bot_uuid": "bot-a", "session_name": "g_1", "content": "x"}]'),
        ("duplicate keys", '{"bot_uuid": "bot-b", "bot_uuid": "bot-a", "session_name": "g_1", "content": 5}'),
    ],
)
def test_it_refuses_each_kind_of_hostile_remember_body(db, settings, name, raw):
    settings.MEMCONSOLE_API_RATE_PER_MINUTE = 10**6
    _, secret = tokens.create_token("bot a", ["bot-a"], Actor.system("tests"))
    before = rows()
    response = Client().post(
        "/api/v1/remember", data=raw, content_type="application/json", headers={"Authorization": f"Bearer {secret}"}
    )
    assert response.status_code in {400, 403, 413, 422}, (name, response.content[:300])
    assert response.json()["error"]["message"]
    assert rows() == before, name
    record_figure("hostile_input", "api_named_cases", 1)


def test_it_refuses_hostile_bearer_tokens(db):
    tokens.create_token("bot a", ["bot-a"], Actor.system("tests"))
    body = json.dumps({**SCOPE, "content": "x"})
    for secret in ['{"$ne": ""}', "mct_%", "mct_' OR '1'='1", "mct_" + "a" * 10_000, "mct_\u202e", "*", "null"]:
        response = Client().post(
            "/api/v1/remember",
            data=body,
            content_type="application/json",
            headers={"Authorization": f"Bearer {secret}"},
        )
        assert response.status_code == 401, secret
    assert not Episode.objects.exists()
    assert math.isfinite(AuditEntry.objects.count())
    record_figure("hostile_input", "api_named_cases", 7)


def test_it_keeps_stored_text_exactly_and_filters_it_literally(keys, system):
    """SQL, wildcards and operators inside legal strings are data: stored as is, matched exactly."""
    texts = ["'; DROP TABLE memory_episode; --", "%", "_", "$ne", '{"$gt": ""}', "a\\b"]
    for text in texts:
        episodes.remember(
            keys, system, f"content {text}", tags=[text], sender_id=text, timestamp=datetime(2025, 1, 1, tzinfo=UTC)
        )
    for text in texts:
        by_tag = episodes.list_episodes(keys, tag=text).episodes
        by_sender = episodes.list_episodes(keys, sender_id=text).episodes
        assert [e.content for e in by_tag] == [f"content {text}"], text
        assert [e.content for e in by_sender] == [f"content {text}"], text
    assert Episode.objects.count() == len(texts)


SURROGATE = "\ud800"
SURROGATE_CALLS = {
    "remember content": lambda k, a: episodes.remember(k, a, f"x{SURROGATE}"),
    "remember tag": lambda k, a: episodes.remember(k, a, "x", tags=[SURROGATE]),
    "remember sender_id": lambda k, a: episodes.remember(k, a, "x", sender_id=SURROGATE),
    "remember sender_name": lambda k, a: episodes.remember(k, a, "x", sender_name=SURROGATE),
    "recall query": lambda k, a: retrieval.recall(k, SURROGATE),
    "recall sender_id": lambda k, a: retrieval.recall(k, "x", sender_id=SURROGATE),
    "list tag": lambda k, a: episodes.list_episodes(k, tag=SURROGATE),
    "profile name": lambda k, a: profiles.update_profile(k, a, "session", name=SURROGATE),
    "profile notes": lambda k, a: profiles.update_profile(k, a, "session", notes=SURROGATE),
    "profile trait": lambda k, a: profiles.update_profile(k, a, "session", add_traits=[SURROGATE]),
    "profile speaker": lambda k, a: profiles.update_profile(k, a, "speaker", SURROGATE, name="x"),
    "inject query": lambda k, a: injection.record_injection(k, a, SURROGATE),
    "inject query_id": lambda k, a: injection.record_injection(k, a, "x", query_id=SURROGATE),
}


@pytest.mark.parametrize("name", sorted(SURROGATE_CALLS))
def test_it_refuses_a_lone_surrogate_in_every_text_field(keys, system, name):
    """JSON can carry "\\ud800"; no database or tokenizer takes it: a ValidationError, not a crash."""
    before = rows()
    with pytest.raises(ValidationError):
        SURROGATE_CALLS[name](keys, system)
    assert rows() == before
    record_figure("hostile_input", "domain_named_cases", 1)
