"""The jw-agents MemoryStore over memconsole, against a live server: the protocol's behaviours."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest
from memconsole_client import MemconsoleError, MemoryClient
from memconsole_client.jw_agents import MemconsoleMemoryStore, MemoryRecord

from memconsole.memory import tokens
from memconsole.memory.audit import Actor
from memconsole.memory.episode_extras import EpisodeMetadata
from memconsole.memory.models import AuditEntry, Episode

pytestmark = pytest.mark.django_db(transaction=True)

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


@pytest.fixture
def secret(live_server):
    return tokens.create_token("jw-agents", ["agent-1"], Actor.system("tests"))[1]


@pytest.fixture
def store(live_server, secret):
    with MemconsoleMemoryStore(live_server.url, secret, "agent-1") as opened:
        yield opened


def record(session_id, minutes, kind, content, **metadata):
    return MemoryRecord(session_id, T0 + timedelta(minutes=minutes), kind, content, metadata)


def test_it_records_then_recalls_a_record_as_it_was(store):
    original = record("s-1", 0, "preference", "The customer prefers email over phone calls", channel="web")
    store.record(original)

    [back] = store.recall(session_id="s-1")
    assert back == original  # session, time (UTC), kind, content and metadata
    assert back.timestamp.tzinfo is not None and back.timestamp.utcoffset() == timedelta(0)
    [found] = store.recall(session_id="s-1", query="how does the customer like to be contacted?")
    assert found == original


def test_it_filters_by_kind_and_ands_the_filters(store):
    store.record(record("s-1", 0, "question", "Do you ship to Norway?"))
    store.record(record("s-1", 1, "answer", "Yes, we ship to Norway within five days"))
    store.record(record("s-1", 2, "objection", "Shipping to Norway is too expensive"))
    store.record(record("s-2", 3, "answer", "We ship to Sweden too"))

    assert [r.content for r in store.recall(session_id="s-1", kind="answer")] == [
        "Yes, we ship to Norway within five days"
    ]
    assert {r.content for r in store.recall(kind="answer")} == {
        "Yes, we ship to Norway within five days",
        "We ship to Sweden too",
    }
    by_query = store.recall(session_id="s-1", query="shipping to Norway", kind="objection")
    assert [r.content for r in by_query] == ["Shipping to Norway is too expensive"]
    assert store.recall(session_id="s-2", kind="question") == []


def test_it_orders_newest_first_without_a_query_and_by_relevance_with_one(store):
    store.record(record("s-1", 0, "question", "What is the warranty on the blue kettle?"))
    store.record(record("s-2", 5, "answer", "Our shop opens at nine in the morning"))
    store.record(record("s-1", 10, "fact_recalled", "The customer bought a blue kettle in May"))

    assert [r.timestamp for r in store.recall()] == [T0 + timedelta(minutes=m) for m in (10, 5, 0)]
    assert [r.content for r in store.recall(limit=2)] == [
        "The customer bought a blue kettle in May",
        "Our shop opens at nine in the morning",
    ]
    ranked = store.recall(query="when does the shop open?")
    assert ranked[0].content == "Our shop opens at nine in the morning" and ranked[0].session_id == "s-2"


def test_it_lists_sessions(store):
    assert store.list_sessions() == []
    store.record(record("s-1", 0, "question", "one"))
    store.record(record("s-2", 1, "question", "two"))
    store.record(record("s-1", 2, "answer", "three"))
    assert sorted(store.list_sessions()) == ["s-1", "s-2"]


def test_forget_returns_how_many_records_were_removed(store):
    for minute in range(3):
        store.record(record("s-1", minute, "question", f"question {minute}", n=minute))
    store.record(record("s-2", 5, "answer", "kept"))

    assert store.forget("s-1") == 3
    assert store.recall(session_id="s-1") == []
    assert store.list_sessions() == ["s-2"]
    assert store.forget("s-1") == 0
    assert EpisodeMetadata.objects.count() == 0
    assert len({e.batch_id for e in AuditEntry.objects.filter(operation="delete")}) == 1  # one batch


def test_recall_of_an_unknown_session_is_empty(store):
    store.record(record("s-1", 0, "question", "anything"))
    assert store.recall(session_id="nobody") == []
    assert store.recall(session_id="nobody", query="anything") == []
    assert "nobody" not in store.list_sessions()  # reading creates no session


def test_records_survive_a_new_store(live_server, secret, store):
    original = record("s-9", 0, "fact_recalled", "The order number is 4411", order=4411)
    store.record(original)
    with MemconsoleMemoryStore(live_server.url, secret, "agent-1") as again:
        assert again.recall(session_id="s-9") == [original]
        assert again.list_sessions() == ["s-9"]


def test_it_keeps_other_bots_out(live_server, store):
    other = tokens.create_token("other", ["agent-2"], Actor.system("tests"))[1]
    store.record(record("s-1", 0, "question", "private to agent-1"))
    with MemconsoleMemoryStore(live_server.url, other, "agent-2") as theirs:
        assert theirs.list_sessions() == [] and theirs.recall(session_id="s-1") == []
    with MemconsoleMemoryStore(live_server.url, other, "agent-1") as forbidden, pytest.raises(MemconsoleError) as exc:
        forbidden.list_sessions()
    assert exc.value.status == 403


def test_it_refuses_what_the_protocol_does_not_know(store):
    with pytest.raises(ValueError, match="kind"):
        store.record(dataclasses.replace(record("s-1", 0, "question", "x"), kind="rumour"))
    with pytest.raises(ValueError, match="session_id"):
        store.record(record(" s-1", 0, "question", "x"))
    with pytest.raises(ValueError, match="limit"):
        store.recall(limit=0)
    assert not Episode.objects.exists()


def test_a_naive_timestamp_is_read_as_utc(store):
    naive = datetime(2026, 3, 1, 9, 0)  # noqa: DTZ001 (the point of the test)
    store.record(MemoryRecord("s-1", naive, "answer", "naive", {}))
    assert store.recall(session_id="s-1")[0].timestamp == T0


def test_a_record_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        record("s-1", 0, "question", "x").content = "y"


def test_forget_leaves_what_else_the_session_holds(live_server, secret, store):
    store.record(record("s-3", 0, "question", "Do you ship to Oslo?"))
    with MemoryClient(live_server.url, secret, "agent-1", "s-3") as plain:
        plain.remember("The user is allergic to peanuts", sender_id="u1")  # not a jw-agents record

    assert store.forget("s-3") == 1
    assert store.recall(session_id="s-3") == []
    assert [e.content for e in Episode.objects.all()] == ["The user is allergic to peanuts"]
