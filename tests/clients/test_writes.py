"""The client's side of the writes that adjust instead of refusing, against a live server (docs/api.md,
"Writes that never lose a memory over a detail" and "No lost profile updates"): remember's `query_id`
and the stored `importance`/`adjusted`; update_profile's `append_notes`, `if_version` (a 409 conflict
as `MemconsoleError` with `current_version`) and the answer's `evicted`/`adjusted`; a time without a
zone sent as UTC. Each with the sync and the async client, which share their requests (calls.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import anyio
import pytest
from memconsole_client import AsyncMemoryClient, MemconsoleError, MemoryClient
from memconsole_client.transport import timestamp

from memconsole.memory import tokens
from memconsole.memory.audit import Actor
from memconsole.memory.models import AuditEntry, Episode

pytestmark = pytest.mark.django_db(transaction=True)

NAIVE = datetime(2025, 1, 1, 9, 30)  # noqa: DTZ001  # a time without a zone, on purpose


@pytest.fixture
def secret(live_server):
    return tokens.create_token("client writes", ["bot-a"], Actor.system("tests"))[1]


@pytest.fixture
def memory(live_server, secret):
    with MemoryClient(live_server.url, secret, "bot-a", "group_100") as client:
        yield client


def test_remember_sends_the_query_id_and_answers_the_importance_as_stored(memory):
    clamped = memory.remember("Alice lives in Paris", sender_id="u1", importance=7, query_id="msg-8812")
    kept = memory.remember("Bob likes tea", sender_id="u2", importance=3)

    assert (clamped["importance"], clamped["adjusted"]) == (5, ["importance"])
    assert (kept["importance"], kept["adjusted"]) == (3, [])
    assert memory.remember("Carol is new", importance=0)["importance"] == 1
    stored = Episode.objects.get(episode_id=clamped["episode_id"])
    assert (stored.importance, stored.query_id) == (5, "msg-8812")
    assert Episode.objects.get(episode_id=kept["episode_id"]).query_id == ""
    assert memory.recall("Where does Alice live?", top_k=1)[0]["importance"] == 5
    assert AuditEntry.objects.filter(operation="remember").count() == 3


def test_a_time_without_a_zone_is_sent_as_utc(memory):
    assert timestamp(NAIVE) == "2025-01-01T09:30:00+00:00"
    assert timestamp(datetime(2025, 1, 1, 9, 30, tzinfo=timezone(timedelta(hours=8)))) == "2025-01-01T09:30:00+08:00"
    assert timestamp("2025-01-01T09:30:00") == "2025-01-01T09:30:00" and timestamp(None) is None

    naive = memory.remember("naive", timestamp=NAIVE)
    text = memory.remember("text", timestamp="2025-01-01T09:31:00")  # the server reads it as UTC too
    hits = memory.recall(
        "naive",
        time_after=NAIVE,
        time_before=NAIVE,
    )
    assert [hit["episode_id"] for hit in hits] == [naive["episode_id"]]  # both bounds inclusive
    assert Episode.objects.get(episode_id=naive["episode_id"]).timestamp == datetime(2025, 1, 1, 9, 30, tzinfo=UTC)
    assert Episode.objects.get(episode_id=text["episode_id"]).timestamp == datetime(2025, 1, 1, 9, 31, tzinfo=UTC)


def test_update_profile_appends_notes_and_answers_what_it_evicted_and_cut(memory):
    first = memory.update_profile("speaker", "u1", name="Alice", notes="Lives in Paris")
    assert first["evicted"] == {"traits": [], "preferences": []} and first["adjusted"] == []
    appended = memory.update_profile("speaker", "u1", append_notes="Moved to Berlin")
    assert appended["notes"] == "Lives in Paris\nMoved to Berlin"

    memory.update_profile(add_traits=[f"trait {n:02d}" for n in range(20)])
    full = memory.update_profile(add_traits=["curious"], add_preferences=["tea"])
    assert full["evicted"] == {"traits": ["trait 00"], "preferences": []}
    assert len(full["traits"]) == 20 and full["traits"][-1] == "curious" and full["preferences"] == ["tea"]
    cut = memory.update_profile(notes="x" * 2500)
    assert cut["adjusted"] == ["notes"] and cut["notes"] == "x" * 2000
    assert memory.get_profile()["notes"] == "x" * 2000


def test_a_stale_if_version_is_a_conflict_with_the_current_version(memory):
    assert memory.update_profile(name="Hiking club", if_version=0)["version"] == 1  # 0: no profile yet
    read = memory.get_profile()
    assert memory.update_profile(add_traits=["outdoorsy"], if_version=read["version"])["version"] == 2

    with pytest.raises(MemconsoleError) as stale:
        memory.update_profile(name="Chess club", if_version=read["version"])
    error = stale.value
    assert (error.status, error.code, error.field, error.current_version) == (409, "conflict", "if_version", 2)
    assert error.retry_after is None
    assert memory.get_profile()["name"] == "Hiking club"  # nothing changed
    assert memory.update_profile(name="Chess club", if_version=error.current_version)["version"] == 3

    with pytest.raises(MemconsoleError) as invalid:
        memory.update_profile(name="x", if_version=-1)
    assert (invalid.value.status, invalid.value.code, invalid.value.current_version) == (422, "invalid", None)


def test_the_async_client_has_the_same_fields(live_server, secret):
    async def main():
        async with AsyncMemoryClient(live_server.url, secret, "bot-a", "group_100") as memory:
            stored = await memory.remember(
                "Alice lives in Paris",
                sender_id="u1",
                importance=9,
                query_id="a-7",
                timestamp=NAIVE,
            )
            profile = await memory.update_profile("speaker", "u1", append_notes="early riser", if_version=0)
            with pytest.raises(MemconsoleError) as stale:
                await memory.update_profile("speaker", "u1", append_notes="again", if_version=0)
            return stored, profile, stale.value

    stored, profile, stale = anyio.run(main)
    assert (stored["importance"], stored["adjusted"]) == (5, ["importance"])
    episode = Episode.objects.get(episode_id=stored["episode_id"])
    assert (episode.query_id, episode.timestamp) == ("a-7", NAIVE.replace(tzinfo=UTC))
    assert profile["notes"] == "early riser" and profile["version"] == 1
    assert profile["evicted"] == {"traits": [], "preferences": []} and profile["adjusted"] == []
    assert (stale.status, stale.code, stale.current_version) == (409, "conflict", 1)
