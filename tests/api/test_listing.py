"""GET /api/v1/episodes and GET /api/v1/export: a bot reads its own chat's memory whole, and
nothing of another chat, another bot or another status leaks into it."""

from __future__ import annotations

import json

import pytest

from memconsole.memory import episodes
from memconsole.memory.audit import Actor
from memconsole.memory.models import AuditEntry, Episode
from memconsole.memory.scopes import derive_scope

from .conftest import SCOPE_A, SCOPE_B

pytestmark = pytest.mark.django_db


def remember(api, content, scope=SCOPE_A, **fields):
    response = api.post("remember", {**scope, "content": content, **fields})
    assert response.status_code == 201, response.content
    return response.json()["episode_id"]


def test_it_lists_a_chats_episodes_newest_first_in_pages(api):
    ids = [remember(api, f"memory number {n}", sender_id="u1", sender_name="Alice") for n in range(5)]
    first = api.get("episodes", {**SCOPE_A, "limit": 2})
    assert first.status_code == 200, first.content
    body = first.json()
    assert [e["episode_id"] for e in body["episodes"]] == [ids[4], ids[3]]
    assert body["episodes"][0]["content"] == "memory number 4"
    assert body["episodes"][0]["sender_name"] == "Alice"
    rest = api.get("episodes", {**SCOPE_A, "limit": 10, "cursor": body["next_cursor"]}).json()
    assert [e["episode_id"] for e in rest["episodes"]] == [ids[2], ids[1], ids[0]]
    assert rest["next_cursor"] is None


def test_a_newer_page_that_reaches_the_oldest_episode_is_the_last(api):
    ids = [remember(api, f"memory number {n}") for n in range(2)]
    oldest = Episode.objects.order_by("id").first().pk
    body = api.get("episodes", {**SCOPE_A, "limit": 2, "cursor": f"b{oldest - 1}"}).json()
    assert [e["episode_id"] for e in body["episodes"]] == [ids[1], ids[0]]
    assert body["next_cursor"] is None  # nothing older: an empty page would follow


def test_the_list_holds_only_this_chat_and_the_status_asked(api, api_b, token_a):
    mine = remember(api, "mine")
    gone = remember(api, "archived soon")
    remember(api, "another chat", scope={**SCOPE_A, "session_name": "group_101"})
    assert api_b.post("remember", {**SCOPE_B, "content": "another bot"}).status_code == 201
    episodes.archive(derive_scope("bot-a", "group_100", "session"), Actor.system("tests"), [gone])
    active = api.get("episodes", SCOPE_A).json()["episodes"]
    assert [e["episode_id"] for e in active] == [mine]
    archived = api.get("episodes", {**SCOPE_A, "status": "archived"}).json()["episodes"]
    assert [e["episode_id"] for e in archived] == [gone]
    assert api.get("episodes", SCOPE_B).status_code == 403  # bot-b is not this token's


@pytest.mark.parametrize(
    ("params", "status", "field"),
    [
        ({"limit": 0}, 400, None),
        ({"limit": 101}, 400, None),
        ({"status": "deleted"}, 400, None),
        ({"cursor": "zz"}, 422, "cursor"),
        ({"colour": "red"}, 400, "colour"),
    ],
)
def test_a_bad_list_request_is_a_clear_error(api, params, status, field):
    response = api.get("episodes", {**SCOPE_A, **params})
    assert response.status_code in (status, 422 if status == 400 else status), response.content
    error = response.json()["error"]
    assert error["message"]
    if field:
        assert error["field"] == field


def test_the_export_is_this_chats_whole_memory_and_is_audited(api):
    kept = remember(api, "Alice lives in Paris", sender_id="u1", sender_name="Alice")
    remember(api, "another chat", scope={**SCOPE_A, "session_name": "group_101"})
    assert api.post("profile", {**SCOPE_A, "set": {"name": "Design group"}}).status_code == 200
    response = api.client.get("/api/v1/export", SCOPE_A, headers={"Authorization": f"Bearer {api.secret}"})
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    document = json.loads(b"".join(response.streaming_content))
    assert [e["id"] for e in document["episodes"]["episodes"]] == [kept]
    assert [p["profile"]["name"] for p in document["profiles"]["profiles"]] == ["Design group"]
    entry = AuditEntry.objects.filter(operation="export").latest("id")
    assert entry.actor.startswith("token:")
    assert (
        api.client.get("/api/v1/export", SCOPE_B, headers={"Authorization": f"Bearer {api.secret}"}).status_code == 403
    )
    assert api.client.get("/api/v1/export", SCOPE_A).status_code == 401


def test_a_bot_reads_the_explanation_of_its_own_injection_and_no_one_elses(api, api_b):
    remember(api, "Alice lives in Paris", sender_id="u1", sender_name="Alice")
    made = api.post("inject", {**SCOPE_A, "query": "Where does Alice live?", "sender_id": "u1", "query_id": "m-7"})
    assert made.status_code == 200, made.content
    snapshot_id = made.json()["snapshot_id"]
    response = api.get(f"snapshots/{snapshot_id}", SCOPE_A)
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["snapshot_id"], body["query"], body["query_id"]) == (snapshot_id, "Where does Alice live?", "m-7")
    assert body["speaker"]["id"] == "u1"
    assert [e["content"] for e in body["episodes"]] == ["Alice lives in Paris"]
    assert body["system_blocks"] == made.json()["system_blocks"]
    assert body["decision"] is not None
    injected = [c for c in body["decision"]["candidates"] if c["outcome"] == "injected"]
    assert [c["episode_id"] for c in injected] == [e["episode_id"] for e in body["episodes"]]
    # Another chat of the same bot, another bot, and an unknown id: 404 / 403, never the snapshot.
    other_chat = api.get(f"snapshots/{snapshot_id}", {**SCOPE_A, "session_name": "group_101"})
    assert other_chat.status_code == 404
    assert api.get(f"snapshots/{snapshot_id}", SCOPE_B).status_code == 403
    assert api_b.get(f"snapshots/{snapshot_id}", SCOPE_B).status_code == 404
    assert api.get("snapshots/nope", SCOPE_A).status_code == 404
