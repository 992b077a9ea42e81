"""A bot-memory-style bot (keyed facts and a sliding window) on the client, against a live server."""

from __future__ import annotations

import anyio
import pytest
from memconsole_client import AsyncMemoryClient, MemconsoleError, MemoryClient

from memconsole.memory import tokens
from memconsole.memory.audit import Actor

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def secret(live_server):
    return tokens.create_token("bot-memory", ["bot-go"], Actor.system("tests"))[1]


def test_a_bot_remembers_recalls_and_forgets_facts(live_server, secret):
    with MemoryClient(live_server.url, secret, "bot-go", "room-1", "bot") as memory:
        memory.remember_fact("u1", "city", "Paris")
        assert memory.remember_fact("u1", "city", "Berlin")["version"] == 2
        memory.remember_fact("u1", "pet", "cat")
        other_room = memory.for_session("room-2")  # the bot's one space: facts are the agent's
        assert {f["key"]: f["value"] for f in other_room.recall_facts("u1")} == {"city": "Berlin", "pet": "cat"}
        assert [f["value"] for f in memory.recall_facts("u1", "pet")] == ["cat"]
        assert memory.forget_fact("u1", "pet") is True
        with pytest.raises(MemconsoleError) as missing:
            memory.forget_fact("u1", "pet")
        assert missing.value.status == 404
        assert memory.recall_facts("nobody") == []


def test_a_bot_keeps_a_sliding_window_per_room(live_server, secret):
    async def main():
        async with AsyncMemoryClient(live_server.url, secret, "bot-go", "room-1") as memory:
            for n in range(22):
                await memory.append_message("user" if n % 2 == 0 else "assistant", f"m{n}", sender_id="u1")
            await memory.for_session("room-2").append_message("user", "elsewhere")
            return await memory.recent_messages(), await memory.recent_messages(2)

    whole, last_two = anyio.run(main)
    assert whole["window_size"] == 20 and [m["content"] for m in whole["messages"]] == [f"m{n}" for n in range(2, 22)]
    assert [(m["role"], m["content"]) for m in last_two["messages"]] == [("user", "m20"), ("assistant", "m21")]
