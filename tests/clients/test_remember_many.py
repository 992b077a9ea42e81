"""The client's `remember_many` (issue 22's batch writes) against a live server, sync and async: one
request for many episodes, answers in order, a correction inside the batch, and all or nothing as a
`MemconsoleError` naming the episode."""

from __future__ import annotations

from datetime import UTC, datetime

import anyio
import pytest
from memconsole_client import AsyncMemoryClient, MemconsoleError, MemoryClient

from memconsole.memory import tokens
from memconsole.memory.audit import Actor
from memconsole.memory.models import AuditEntry, Episode

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def secret(live_server):
    return tokens.create_token("client batch", ["bot-a"], Actor.system("tests"))[1]


def test_remember_many_stores_a_batch_in_one_request(live_server, secret):
    with MemoryClient(live_server.url, secret, "bot-a", "group_100") as memory:
        result = memory.remember_many(
            [
                {"content": "Alice's favourite colour is blue", "sender_id": "u1", "sender_name": "Alice"},
                "The office is on floor 5",  # a string is an episode's content
                {
                    "content": "Alice's favourite colour is green",
                    "sender_id": "u1",
                    "tags": ["correction"],
                    "timestamp": datetime(2025, 1, 1, 9, 30),  # noqa: DTZ001  # no zone: sent as UTC
                    "query_id": None,  # None reads as absent, as for remember
                },
            ]
        )
        blue, office, green = result["episodes"]
        assert result["indexed"] is True and len(result["batch_id"]) == 32
        assert green["superseded"] == [blue["episode_id"]] and blue["status"] == "superseded"
        assert [hit["episode_id"] for hit in memory.recall("Which floor is the office on?", top_k=1)] == [
            office["episode_id"]
        ]

    assert Episode.objects.get(episode_id=green["episode_id"]).timestamp == datetime(2025, 1, 1, 9, 30, tzinfo=UTC)
    entries = AuditEntry.objects.filter(operation="remember")
    assert entries.count() == 3 and {e.batch_id for e in entries} == {result["batch_id"]}


def test_remember_many_is_all_or_nothing(live_server, secret):
    async def main() -> None:
        async with AsyncMemoryClient(live_server.url, secret, "bot-a", "group_100") as memory:
            with pytest.raises(MemconsoleError) as refused:
                await memory.remember_many(["Bob plays chess", {"content": "  "}])
            assert (refused.value.status, refused.value.field) == (422, "episodes[1].content")
            stored = await memory.remember_many(["Bob plays chess"])
            assert [a["status"] for a in stored["episodes"]] == ["active"]

    anyio.run(main)
    assert [episode.content for episode in Episode.objects.all()] == ["Bob plays chess"]
