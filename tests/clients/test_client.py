"""The memconsole_client package against a live server: the async client, the shared connection pool,
and the typed answers (tests/clients/test_conversation.py plays a whole conversation with the sync one)."""

from __future__ import annotations

import anyio
import httpx
import pytest
from memconsole_client import AsyncMemoryClient, MemconsoleError, MemoryClient, Retry

from memconsole.memory import tokens
from memconsole.memory.audit import Actor
from memconsole.memory.models import AuditEntry

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def secret(live_server):
    return tokens.create_token("client tests", ["bot-a"], Actor.system("tests"))[1]


def test_it_speaks_the_same_api_asynchronously(live_server, secret):
    async def main():
        async with AsyncMemoryClient(live_server.url, secret, "bot-a", "group_100") as memory:
            stored = await memory.remember("Alice lives in Paris", sender_id="u1", sender_name="Alice", tags=["home"])
            office = memory.for_session("group_200")
            await office.remember("Bob likes sushi", sender_id="u2")
            hits = await memory.recall("Where does Alice live?", top_k=5)
            profile = await memory.update_profile("speaker", "u1", name="Alice", add_traits=["calm"])
            fetched = await memory.get_profile("speaker", "u1")
            injection = await memory.inject("Where do I live?", sender_id="u1", query_id="a-1")
            with pytest.raises(MemconsoleError) as forbidden:
                await AsyncMemoryClient(live_server.url, secret, "bot-b", "g").recall("x")
            forgotten = await memory.forget(stored["episode_id"])
            return stored, hits, profile, fetched, injection, forbidden.value, forgotten

    stored, hits, profile, fetched, injection, forbidden, forgotten = anyio.run(main)
    assert stored["status"] == "active" and stored["indexed"] is True
    assert [hit["content"] for hit in hits] == ["Alice lives in Paris"]  # not the office's sushi
    assert {key: profile[key] for key in fetched} == fetched
    assert profile["traits"] == ["calm"] and profile["version"] == 1
    assert profile["evicted"] == {"traits": [], "preferences": []} and profile["adjusted"] == []
    assert injection["context"]["episodes"][0]["content"] == "Alice lives in Paris"
    assert injection["context"]["speaker"] == {"id": "u1", "name": "Alice"}
    assert (forbidden.status, forbidden.code, forbidden.field) == (403, "forbidden", "bot_uuid")
    assert forgotten is True
    assert AuditEntry.objects.filter(operation="remember").count() == 2


def test_it_reuses_one_pooled_connection_across_calls_and_chats(live_server, secret):
    local_ports: list[int] = []

    def note_port(response: httpx.Response) -> None:
        local_ports.append(response.extensions["network_stream"].get_extra_info("client_addr")[1])

    with MemoryClient(live_server.url, secret, "bot-a", "group_100") as memory:
        memory.http_client.event_hooks["response"].append(note_port)
        private = memory.for_session("person_u1", isolation="bot")
        memory.remember("one")
        memory.recall("one")
        private.remember("two")
        private.get_profile()
        assert private.http_client is memory.http_client
    assert len(local_ports) == 4 and len(set(local_ports)) == 1  # one keep-alive connection for all four
    assert memory.http_client.is_closed  # the context manager closed the pool


def test_it_leaves_a_pool_it_was_given_open(live_server, secret):
    with httpx.Client(timeout=5) as http:
        with MemoryClient(live_server.url, secret, "bot-a", "g", http_client=http) as memory:
            memory.get_profile()
        assert not http.is_closed
        assert MemoryClient(live_server.url, secret, "bot-a", "g", http_client=http).get_profile()["version"] == 0


def test_it_reports_an_unreachable_server_after_its_timeout():
    async def main():
        with pytest.raises(MemconsoleError) as error:
            await AsyncMemoryClient("http://127.0.0.1:9", "t", "bot-a", "g", timeout=2).recall("x")
        return error.value

    error = anyio.run(main)
    assert (error.status, error.code) == (0, "unreachable")


def test_it_keeps_the_old_module_surface():
    memory = MemoryClient("https://memory.example.org/", "t", "bot-a", "g", retry=Retry(attempts=1))
    assert memory.base_url == "https://memory.example.org/api/v1"
    assert MemoryClient("https://m.example.org/api/v1", "t", "b", "g").base_url == "https://m.example.org/api/v1"
    other = memory.for_session("group_2", isolation="bot")
    assert (other.bot_uuid, other.session_name, other.isolation, other.token) == ("bot-a", "group_2", "bot", "t")
    assert other.retry == Retry(attempts=1) and other.timeout == 10.0
    error = MemconsoleError(422, "invalid", "bad", "tags")
    assert str(error) == "422 invalid: bad (tags)" and error.retry_after is None


def test_it_asks_for_the_conversation_window_with_an_injection(live_server, secret):
    with MemoryClient(live_server.url, secret, "bot-a", "group_100") as memory:
        memory.append_message("user", "Shall we meet at noon?", sender_id="u1")
        plain = memory.inject("When do we meet?", sender_id="u1")
        with_window = memory.inject("When do we meet?", sender_id="u1", include_window=True)
    assert plain["context"].get("history") is None  # not asked for
    assert [message["content"] for message in with_window["context"]["history"]] == ["Shall we meet at noon?"]
