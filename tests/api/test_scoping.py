"""Token scoping: bot A's token never reads, writes or deletes bot B's memory, in either isolation."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memconsole.memory import tokens
from memconsole.memory.audit import Actor
from memconsole.memory.models import Episode, Profile

from .conftest import Api, memory_rows

pytestmark = pytest.mark.django_db

ISOLATIONS = ["session", "bot"]
SECRET = "Bot B's secret: the vault code is 4711"


@pytest.fixture
def bot_b_memory(api_b):
    """bot-b memory in both isolation modes: an episode each and a speaker profile."""
    made = {}
    for isolation in ISOLATIONS:
        scope = {"bot_uuid": "bot-b", "session_name": "group_100", "isolation": isolation}
        response = api_b.post("remember", {**scope, "content": f"{SECRET} ({isolation})", "sender_id": "u1"})
        assert response.status_code == 201
        made[isolation] = response.json()["episode_id"]
    profile = {"bot_uuid": "bot-b", "session_name": "group_100", "type": "speaker", "sender_id": "u1"}
    assert api_b.post("profile", {**profile, "set": {"notes": SECRET}}).status_code == 200
    return made


@pytest.mark.parametrize("isolation", ISOLATIONS)
@pytest.mark.parametrize("bot_uuid", ["bot-b", " bot-b ", "BOT-B", "bot-c"])
def test_it_refuses_every_call_naming_a_bot_the_token_does_not_hold(api, bot_b_memory, isolation, bot_uuid):
    scope = {"bot_uuid": bot_uuid, "session_name": "group_100", "isolation": isolation}
    before = memory_rows()
    calls = [
        api.post("remember", {**scope, "content": "overwrite attempt"}),
        api.post("recall", {**scope, "query": "vault code", "statuses": ["active", "superseded", "archived"]}),
        api.get("profile", {**scope, "type": "speaker", "sender_id": "u1"}),
        api.post("profile", {**scope, "type": "speaker", "sender_id": "u1", "set": {"notes": "changed"}}),
        api.post("forget", {**scope, "episode_id": bot_b_memory[isolation]}),
        api.post("inject", {**scope, "query": "vault code", "sender_id": "u1"}),
    ]
    for response in calls:
        assert response.status_code == 403, (response.request["PATH_INFO"], response.content)
        assert SECRET.encode() not in response.content
    assert memory_rows() == before


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_it_keeps_bot_b_memory_out_of_bot_a_scopes(api, bot_b_memory, isolation):
    """With its own bot_uuid and the same session name, bot A's token reaches only bot A's memory."""
    scope = {"bot_uuid": "bot-a", "session_name": "group_100", "isolation": isolation}
    every_status = ["active", "superseded", "archived"]
    for query in ("vault code", SECRET, bot_b_memory["session"], bot_b_memory["bot"]):
        response = api.post("recall", {**scope, "query": query, "statuses": every_status, "top_k": 50})
        assert response.status_code == 200 and response.json() == {"episodes": []}
        injection = api.post("inject", {**scope, "query": query, "sender_id": "u1"}).json()
        assert SECRET not in str(injection)
    profile = api.get("profile", {**scope, "type": "speaker", "sender_id": "u1"}).json()
    assert profile["notes"] == "" and profile["version"] == 0
    for episode_id in bot_b_memory.values():
        assert api.post("forget", {**scope, "episode_id": episode_id}).status_code == 404
    assert Episode.objects.filter(episode_id__in=bot_b_memory.values()).count() == 2
    api.post("profile", {**scope, "type": "speaker", "sender_id": "u1", "set": {"notes": "bot a's own"}})
    notes = {p.scope_key: p.payload["notes"] for p in Profile.objects.all()}
    assert notes == {"bot-b:group_100": SECRET, "bot-a:group_100": "bot a's own"}


def test_it_limits_a_multi_bot_token_to_its_bots(bot_b_memory):
    _, secret = tokens.create_token("a and c", ["bot-a", "bot-c"], Actor.system("tests"))
    api = Api(secret)
    for bot_uuid in ("bot-a", "bot-c"):
        scope = {"bot_uuid": bot_uuid, "session_name": "group_100"}
        assert api.post("remember", {**scope, "content": "fine"}).status_code == 201
    response = api.post("recall", {"bot_uuid": "bot-b", "session_name": "group_100", "query": "vault"})
    assert response.status_code == 403


def test_it_rejects_bot_uuids_that_could_alias_another_scope(api, bot_b_memory):
    for bot_uuid in ("bot-a:bot-b", "bot-a\nbot-b", "bot a"):
        response = api.post("recall", {"bot_uuid": bot_uuid, "session_name": "group_100", "query": "vault"})
        assert response.status_code in (403, 422), response.content


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    session_name=st.one_of(
        st.sampled_from(["group_100", "bot-b:group_100", "bot:bot-b", "global"]), st.text(min_size=1, max_size=20)
    ),
    isolation=st.sampled_from(ISOLATIONS),
    query=st.one_of(st.just("vault code 4711"), st.text(min_size=1, max_size=30)),
)
def test_it_never_leaks_bot_b_memory_to_bot_a_for_any_session_name(api, bot_b_memory, session_name, isolation, query):
    scope = {"bot_uuid": "bot-a", "session_name": session_name, "isolation": isolation}
    every_status = ["active", "superseded", "archived"]
    recall = api.post("recall", {**scope, "query": query, "statuses": every_status, "top_k": 50})
    inject = api.post("inject", {**scope, "query": query, "sender_id": "u1"})
    profile = api.get("profile", {**scope, "type": "speaker", "sender_id": "u1"})
    for response in (recall, inject, profile):
        assert response.status_code in (200, 422), response.content
        assert b"4711" not in response.content
