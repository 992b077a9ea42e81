"""Issue 20 over MCP: kind and metadata on remember/recall, and forget with all=true."""

from __future__ import annotations

import pytest

from memconsole.memory.models import AuditEntry, Episode

from .conftest import data_of, error_of, run_client

pytestmark = pytest.mark.django_db(transaction=True)

A = {"bot_uuid": "bot-a", "session_name": "group_100"}


def test_it_remembers_kind_and_metadata_and_forgets_a_whole_session(live_server, token):
    async def scenario(client):
        await client.call_tool(
            "remember", {**A, "content": "Do you ship to Norway?", "kind": "question", "metadata": {"ticket": 9}}
        )
        await client.call_tool("remember", {**A, "content": "We ship to Norway", "kind": "answer"})
        recalled = await client.call_tool("recall", {**A, "query": "ship Norway", "kind": "question"})
        forgotten = await client.call_tool("forget", {**A, "all": True})
        return data_of(recalled), data_of(forgotten)

    recalled, forgotten = run_client(live_server.url, token[1], "auto", scenario)
    [hit] = recalled["episodes"]
    assert hit["kind"] == "question" and hit["metadata"] == {"ticket": 9}
    assert forgotten == {"deleted": True, "count": 2}
    assert not Episode.objects.exists()
    assert len({e.batch_id for e in AuditEntry.objects.filter(operation="delete")}) == 1


def test_facts_and_the_window_are_tools(live_server, token):
    async def scenario(client):
        await client.call_tool("remember_fact", {**A, "subject": "u1", "key": "city", "value": "Paris"})
        await client.call_tool("remember_fact", {**A, "subject": "u1", "key": "city", "value": "Berlin"})
        recalled = await client.call_tool("recall_facts", {**A, "subject": "u1"})
        await client.call_tool("append_message", {**A, "role": "user", "content": "hello"})
        await client.call_tool("append_message", {**A, "role": "assistant", "content": "hi there"})
        messages = await client.call_tool("recent_messages", {**A, "limit": 1})
        forgotten = await client.call_tool("forget_fact", {**A, "subject": "u1", "key": "city"})
        again = await client.call_tool("forget_fact", {**A, "subject": "u1", "key": "city"})
        return data_of(recalled), data_of(messages), data_of(forgotten), error_of(again)

    recalled, messages, forgotten, again = run_client(live_server.url, token[1], "auto", scenario)
    assert [(f["key"], f["value"], f["version"]) for f in recalled["facts"]] == [("city", "Berlin", 2)]
    assert [m["content"] for m in messages["messages"]] == ["hi there"] and messages["window_size"] == 20
    assert forgotten == {"forgotten": True} and again["code"] == "not_found"
