"""Each endpoint's happy path over HTTP, and that API writes land in memory and the audit log."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from memconsole.lib import vectors
from memconsole.memory import episodes
from memconsole.memory.audit import verify_audit_chain
from memconsole.memory.models import AuditEntry, Episode, InjectionSnapshot, ProfileVersion, Scope
from memconsole.memory.scopes import derive_scope

from .conftest import SCOPE_A

pytestmark = pytest.mark.django_db


def remember(api, content, **fields):
    response = api.post("remember", {**SCOPE_A, "content": content, **fields})
    assert response.status_code == 201, response.content
    return response.json()


def test_it_remembers_an_episode_and_registers_the_scope(api, token_a):
    stamp = datetime(2025, 3, 1, 9, 30, tzinfo=UTC)
    body = remember(
        api,
        "Alice lives in Paris",
        tags=["fact"],
        importance=4,
        sender_id="u1",
        sender_name="Alice",
        timestamp="2025-03-01T17:30:00+08:00",
    )
    assert body["status"] == "active" and body["superseded"] == []
    episode = Episode.objects.get(episode_id=body["episode_id"])
    assert (episode.content, episode.tags, episode.importance) == ("Alice lives in Paris", ["fact"], 4)
    assert episode.timestamp == stamp
    assert (episode.sender_id, episode.sender_name, episode.source) == ("u1", "Alice", "agent")
    scope = Scope.objects.get(scope_key="bot-a:group_100")
    assert (scope.isolation, scope.user_key) == ("session", "bot-a:group_100")


def test_it_audits_api_writes_with_the_token_as_actor(api, token_a):
    row, _ = token_a
    body = remember(api, "Bob likes green tea", sender_id="u2", sender_name="Bob")
    entry = AuditEntry.objects.get(operation="remember", target_id=body["episode_id"])
    assert entry.actor_type == "token"
    assert entry.actor == f"token:{row.prefix}:bot a"
    assert (entry.scope_key, entry.user_key, entry.sender_id) == ("bot-a:group_100", "bot-a:group_100", "u2")
    assert entry.payload["after"]["content"] == "Bob likes green tea"
    assert verify_audit_chain().ok


def test_it_makes_api_writes_visible_to_the_console_listing(api):
    body = remember(api, "The deploy is on Friday", sender_id="u1")
    page = episodes.list_episodes(derive_scope("bot-a", "group_100", "session"))
    assert [e.episode_id for e in page.episodes] == [body["episode_id"]]


def test_it_supersedes_on_a_correction(api):
    first = remember(api, "Alice's favourite colour is blue", sender_id="u1", sender_name="Alice")
    second = remember(
        api, "Alice's favourite colour is green", sender_id="u1", sender_name="Alice", tags=["correction"]
    )
    assert second["superseded"] == [first["episode_id"]]
    assert Episode.objects.get(episode_id=first["episode_id"]).status == "superseded"


def test_it_recalls_with_scores_and_breakdown(api):
    remember(api, "Alice lives in Paris", sender_id="u1", sender_name="Alice", tags=["home"])
    remember(api, "我喜欢喝绿茶", sender_id="u2", sender_name="Bob")
    response = api.post("recall", {**SCOPE_A, "query": "Where does Alice live?", "top_k": 1})
    assert response.status_code == 200
    [hit] = response.json()["episodes"]
    assert hit["content"] == "Alice lives in Paris"
    assert set(hit["breakdown"]) == {
        *("similarity", "lexical", "relevance"),
        *("recency", "importance", "speaker", "update", "exact"),
    }
    assert 0 < hit["score"] <= 1
    assert datetime.fromisoformat(hit["timestamp"]).tzinfo is not None


def test_it_filters_recall(api):
    old = datetime.now(UTC) - timedelta(days=10)
    remember(api, "Alice lives in Paris", sender_id="u1", importance=4, tags=["home"], timestamp=old.isoformat())
    remember(api, "Bob lives in Berlin", sender_id="u2", importance=2, tags=["home"])
    remember(api, "Carol lives in Shanghai", sender_id="u3", importance=5, tags=["city"])

    def contents(**filters):
        response = api.post("recall", {**SCOPE_A, "query": "who lives where", "top_k": 10, **filters})
        assert response.status_code == 200, response.content
        return sorted(e["content"].split()[0] for e in response.json()["episodes"])

    assert contents() == ["Alice", "Bob", "Carol"]
    assert contents(sender_id="u2") == ["Bob"]
    assert contents(importance_min=4) == ["Alice", "Carol"]
    assert contents(tags=["city"]) == ["Carol"]
    assert contents(time_before=(old + timedelta(days=1)).isoformat()) == ["Alice"]
    assert contents(time_after=(old + timedelta(days=1)).isoformat().replace("+00:00", "Z")) == ["Bob", "Carol"]


def test_it_recalls_other_statuses_only_when_asked(api):
    first = remember(api, "The office is on floor 3", sender_id="u1")
    remember(api, "The office is on floor 5", sender_id="u1", tags=["correction"])

    def ids(**filters):
        response = api.post("recall", {**SCOPE_A, "query": "which floor is the office on", **filters})
        return {e["episode_id"]: e["status"] for e in response.json()["episodes"]}

    assert first["episode_id"] not in ids()
    assert ids(statuses=["superseded"]) == {first["episode_id"]: "superseded"}


def test_it_reads_an_empty_profile_before_any_change(api):
    response = api.get("profile", {**SCOPE_A, "type": "speaker", "sender_id": "u9"})
    assert response.status_code == 200
    assert response.json() == {
        "type": "speaker",
        "sender_id": "u9",
        "name": "",
        "traits": [],
        "preferences": [],
        "notes": "",
        "version": 0,
        "updated_at": None,
    }
    assert api.get("profile", SCOPE_A).json()["type"] == "session"


def test_it_updates_profiles_and_reads_them_back(api):
    body = {
        **SCOPE_A,
        "type": "speaker",
        "sender_id": "u1",
        "set": {"name": "Alice", "notes": "moved in 2024"},
        "add_traits": ["curious", "kind"],
        "add_preferences": ["green tea"],
    }
    response = api.post("profile", body)
    assert response.status_code == 200, response.content
    assert response.json()["traits"] == ["curious", "kind"] and response.json()["version"] == 1
    response = api.post(
        "profile", {**SCOPE_A, "type": "speaker", "sender_id": "u1", "remove_traits": ["KIND"], "add_traits": ["calm"]}
    )
    profile = api.get("profile", {**SCOPE_A, "type": "speaker", "sender_id": "u1"}).json()
    assert (profile["name"], profile["traits"], profile["preferences"]) == ("Alice", ["curious", "calm"], ["green tea"])
    assert profile["notes"] == "moved in 2024" and profile["version"] == 2
    assert AuditEntry.objects.filter(operation="profile_update", actor_type="token").count() == 2
    session = api.post("profile", {**SCOPE_A, "set": {"name": "Hiking club"}}).json()
    assert (session["type"], session["sender_id"], session["name"]) == ("session", "", "Hiking club")


def test_a_profile_answer_names_the_speaker_as_stored(api):
    """An id padded with a BOM or a zero-width space reads and writes u1's profile: the answer says u1."""
    changed = api.post("profile", {**SCOPE_A, "type": "speaker", "sender_id": "u1\u200b", "set": {"name": "Ann"}})
    assert changed.status_code == 200 and changed.json()["sender_id"] == "u1"
    read = api.get("profile", {**SCOPE_A, "type": "speaker", "sender_id": "\ufeffu1"}).json()
    assert (read["sender_id"], read["name"]) == ("u1", "Ann")


def test_an_update_that_changes_nothing_keeps_the_version(api):
    """A bot that re-adds a trait it already stored on every message must not fill the history and
    the audit chain, nor turn a guarded writer's next update into a 409."""
    speaker = {**SCOPE_A, "type": "speaker", "sender_id": "u1"}
    assert api.post("profile", {**speaker, "add_traits": ["tea drinker"]}).json()["version"] == 1
    for same in (
        {},
        {"set": {}},
        {"add_traits": []},
        {"remove_traits": ["never had it"]},
        {"add_traits": ["Tea drinker"]},
    ):
        answer = api.post("profile", {**speaker, **same})
        assert answer.status_code == 200 and answer.json()["version"] == 1, (same, answer.content)
    assert api.post("profile", {**speaker, "add_traits": ["calm"], "if_version": 1}).json()["version"] == 2
    assert AuditEntry.objects.filter(operation="profile_update").count() == 2
    assert ProfileVersion.objects.filter(profile__sender_id="u1").count() == 2


def test_it_forgets_an_episode(api):
    body = remember(api, "A secret to forget", sender_id="u1")
    response = api.post("forget", {**SCOPE_A, "episode_id": body["episode_id"]})
    assert response.status_code == 200 and response.json() == {"deleted": True, "count": 1}
    assert not Episode.objects.filter(episode_id=body["episode_id"]).exists()
    entry = AuditEntry.objects.get(operation="delete", target_id=body["episode_id"])
    assert entry.actor_type == "token"
    recalled = api.post("recall", {**SCOPE_A, "query": "secret", "statuses": ["active", "archived", "superseded"]})
    assert recalled.json()["episodes"] == []
    assert api.post("forget", {**SCOPE_A, "episode_id": body["episode_id"]}).status_code == 404


def test_it_injects_context_and_records_a_snapshot(api):
    api.post("profile", {**SCOPE_A, "set": {"notes": "a hiking club"}})
    api.post(
        "profile",
        {**SCOPE_A, "type": "speaker", "sender_id": "u1", "set": {"name": "Alice"}, "add_traits": ["vegetarian"]},
    )
    remember(api, "Alice does not eat meat", sender_id="u1", sender_name="Alice")
    response = api.post(
        "inject",
        {
            **SCOPE_A,
            "query": "what should we cook for Alice",
            "query_id": "q-1",
            "sender_id": "u1",
            "sender_name": "Alice",
        },
    )
    assert response.status_code == 200, response.content
    body = response.json()
    context = body["context"]
    assert context["speaker"] == {"id": "u1", "name": "Alice"}
    assert context["session_profile"]["notes"] == "a hiking club"
    assert context["speaker_profile"]["traits"] == ["vegetarian"]
    assert [e["content"] for e in context["episodes"]] == ["Alice does not eat meat"]
    assert body["system_blocks"][0].startswith("[Session profile]")
    assert any("Alice does not eat meat" in block for block in body["system_blocks"])
    snapshot = InjectionSnapshot.objects.get(snapshot_id=body["snapshot_id"])
    assert (snapshot.query_id, snapshot.scope_key, snapshot.episode_count) == ("q-1", "bot-a:group_100", 1)
    assert AuditEntry.objects.get(operation="inject").target_id == body["snapshot_id"]


def test_it_serves_an_openapi_31_document(client):
    response = client.get("/api/v1/openapi.json")
    assert response.status_code == 200
    doc = response.json()
    assert doc["openapi"] == "3.1.0"
    assert set(doc["paths"]) == {
        "/remember",
        "/recall",
        "/profile",
        "/forget",
        "/inject",
        "/sessions",
        "/facts",
        "/facts/forget",
        "/messages",
        "/episodes",
        "/export",
        "/snapshots/{snapshot_id}",
        "/openapi.json",
    }


def test_it_uses_bot_isolation_across_sessions(api):
    first = {"bot_uuid": "bot-a", "session_name": "group_1", "isolation": "bot"}
    second = {"bot_uuid": "bot-a", "session_name": "person_7", "isolation": "bot"}
    api.post("remember", {**first, "content": "The bot's owner is Dana"})
    hits = api.post("recall", {**second, "query": "who owns the bot"}).json()["episodes"]
    assert [h["content"] for h in hits] == ["The bot's owner is Dana"]
    assert api.post(
        "recall", {"bot_uuid": "bot-a", "session_name": "person_7", "query": "who owns the bot"}
    ).json() == {"episodes": []}


def test_it_tells_the_bot_whether_the_episode_was_indexed(api, token_a, settings):
    assert remember(api, "Alice lives in Paris", sender_id="u1")["indexed"] is True
    # The vector index goes away (a model change no longer refuses a vector: issue 16's switch).
    settings.CHROMA_HOST, settings.CHROMA_PORT = "127.0.0.1", 9  # discard: nothing listens there
    vectors.reset_client()

    body = remember(api, "Bob lives in Berlin", sender_id="u2")

    assert body["indexed"] is False and body["status"] == "active"
    assert not Episode.objects.get(episode_id=body["episode_id"]).vector_current
