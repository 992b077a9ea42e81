"""The MCP server at /mcp, driven over HTTP by the official MCP Python client against a live server.

Each scenario runs in both protocol eras (the 2026 single exchange and the initialize handshake).
"""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest
from django.utils import timezone
from mcp.shared.exceptions import MCPError

from memconsole.api import bots, schemas
from memconsole.memory.audit import verify_audit_chain
from memconsole.memory.errors import VectorIndexUnavailable
from memconsole.memory.models import AuditEntry, Episode, InjectionSnapshot, Profile
from memconsole.memory.scopes import derive_scope, register_scope

from .conftest import data_of, error_of, run_client

pytestmark = pytest.mark.django_db(transaction=True)

A = {"bot_uuid": "bot-a", "session_name": "group_100"}
B = {"bot_uuid": "bot-b", "session_name": "group_100"}
TOOLS = {"remember", "recall", "forget", "get_profile", "update_profile", "inject", "list_sessions"}
TOOLS |= {"remember_fact", "recall_facts", "forget_fact", "append_message", "recent_messages"}  # issue 20
API_SCHEMAS = {
    "remember": schemas.RememberRequest,
    "recall": schemas.RecallRequest,
    "forget": schemas.ForgetRequest,
    "get_profile": schemas.ProfileQuery,
    "update_profile": schemas.ProfileUpdateRequest,
    "inject": schemas.InjectRequest,
    "remember_fact": bots.FactRequest,
    "recall_facts": bots.FactQuery,
    "forget_fact": bots.FactForgetRequest,
    "append_message": bots.MessageRequest,
    "recent_messages": bots.MessageQuery,
}


def rows() -> dict[str, int]:
    return {model.__name__: model.objects.count() for model in (Episode, AuditEntry, Profile, InjectionSnapshot)}


def test_it_lists_the_tools_with_their_json_schemas(live_server, token, mode):
    async def scenario(client):
        return (await client.list_tools()).tools

    tools = {tool.name: tool for tool in run_client(live_server.url, token[1], mode, scenario)}
    assert set(tools) == TOOLS
    for name, tool in tools.items():
        schema = tool.input_schema
        assert schema["type"] == "object" and schema["additionalProperties"] is False
        assert tool.description
        if name != "list_sessions":
            assert {"bot_uuid", "session_name"} <= set(schema["required"])
            # The JSON API's own request schema: the same types and limits as /api/v1 (and its OpenAPI document).
            assert schema == {
                key: value for key, value in API_SCHEMAS[name].model_json_schema().items() if key != "title"
            }
    remember = tools["remember"].input_schema
    assert remember["required"] == ["bot_uuid", "session_name", "content"]
    importance = remember["properties"]["importance"]["anyOf"][0]  # any whole number, stored clamped to 1-5
    assert importance["type"] == "integer" and "maximum" not in importance and "adjusted" in importance["description"]
    assert remember["properties"]["tags"]["anyOf"][0]["maxItems"] == 20
    assert tools["recall"].annotations.read_only_hint is True
    assert tools["forget"].annotations.destructive_hint is True


def test_it_remembers_recalls_and_injects_scoped_and_audited_like_the_api(live_server, token, mode):
    row, secret = token

    async def scenario(client):
        paris = data_of(
            await client.call_tool(
                "remember",
                {**A, "content": "Alice lives in Paris", "sender_id": "u1", "sender_name": "Alice", "tags": ["home"]},
            )
        )
        await client.call_tool("remember", {**A, "session_name": "group_200", "content": "Bob likes sushi"})
        recalled = data_of(await client.call_tool("recall", {**A, "query": "Where does Alice live?", "top_k": 3}))
        profile = data_of(
            await client.call_tool(
                "update_profile",
                {**A, "type": "speaker", "sender_id": "u1", "set": {"name": "Alice"}, "add_traits": ["calm"]},
            )
        )
        fetched = data_of(await client.call_tool("get_profile", {**A, "type": "speaker", "sender_id": "u1"}))
        injected = data_of(
            await client.call_tool(
                "inject", {**A, "query": "Where do I live?", "query_id": "q-1", "sender_id": "u1", "sender_name": "A"}
            )
        )
        sessions = data_of(await client.call_tool("list_sessions", {}))
        forgotten = data_of(await client.call_tool("forget", {**A, "episode_id": paris["episode_id"]}))
        again = error_of(await client.call_tool("forget", {**A, "episode_id": paris["episode_id"]}))
        after = data_of(await client.call_tool("recall", {**A, "query": "Where does Alice live?"}))
        return paris, recalled, profile, fetched, injected, sessions, forgotten, again, after

    paris, recalled, profile, fetched, injected, sessions, forgotten, again, after = run_client(
        live_server.url, secret, mode, scenario
    )
    assert paris["status"] == "active" and paris["superseded"] == [] and paris["indexed"] is True
    assert [hit["content"] for hit in recalled["episodes"]] == ["Alice lives in Paris"]  # not group_200's sushi
    assert recalled["episodes"][0]["sender_name"] == "Alice" and "breakdown" in recalled["episodes"][0]
    assert profile["traits"] == ["calm"] and profile["version"] == 1
    assert {**fetched, "evicted": {"traits": [], "preferences": []}, "adjusted": []} == profile  # + what limits did
    assert injected["context"]["episodes"][0]["content"] == "Alice lives in Paris"
    assert (
        injected["context"]["history"] is None and "facts" in injected["context"]["speaker_profile"]
    )  # the API's shape
    assert any("Alice lives in Paris" in block for block in injected["system_blocks"])
    assert {(s["bot_uuid"], s["session_name"], s["isolation"]) for s in sessions["sessions"]} == {
        ("bot-a", "group_100", "session"),
        ("bot-a", "group_200", "session"),
    }
    assert forgotten == {"deleted": True, "count": 1}
    assert again["code"] == "not_found"
    assert after["episodes"] == []

    # The rows are the JSON API's: in the derived scope, audited under the token, the injection kept.
    keys = derive_scope("bot-a", "group_100", "session")
    assert not Episode.objects.filter(user_key=keys.user_key).exists()
    sushi = Episode.objects.get(user_key=derive_scope("bot-a", "group_200").user_key)
    assert sushi.content == "Bob likes sushi"
    snapshot = InjectionSnapshot.objects.get()
    assert (snapshot.query_id, snapshot.scope_key) == ("q-1", keys.scope_key)
    writes = AuditEntry.objects.filter(operation__in=["remember", "delete", "profile_update", "inject"])
    assert set(writes.values_list("actor", flat=True)) == {f"token:{row.prefix}:mcp assistant"}
    assert sorted(writes.values_list("operation", flat=True)) == [
        "delete",
        "inject",
        "profile_update",
        "remember",
        "remember",
    ]
    assert verify_audit_chain().ok


def test_it_refuses_a_bot_the_token_does_not_hold(live_server, token, mode):
    register_scope(derive_scope("bot-b", "group_100"))
    before = rows()
    calls: list[tuple[str, dict[str, Any]]] = [
        ("remember", {**B, "content": "x"}),
        ("recall", {**B, "query": "x"}),
        ("forget", {**B, "episode_id": "0123456789ab"}),
        ("get_profile", B),
        ("update_profile", {**B, "set": {"name": "x"}}),
        ("inject", {**B, "query": "x"}),
        ("remember", {**B, "isolation": "bot", "content": "x"}),
        ("list_sessions", {"bot_uuid": "bot-b"}),
    ]

    async def scenario(client):
        refused = [error_of(await client.call_tool(name, arguments)) for name, arguments in calls]
        return refused, data_of(await client.call_tool("list_sessions", {}))

    refused, sessions = run_client(live_server.url, token[1], mode, scenario)
    assert refused == [
        {"code": "forbidden", "message": "this token may not use this bot's memory", "field": "bot_uuid"}
    ] * len(calls)
    assert rows() == before  # nothing written, not even an audit entry
    assert sessions == {"bot_uuids": ["bot-a"], "sessions": []}  # bot-b's space is not listed


def test_it_answers_malformed_arguments_with_tool_errors(live_server, token, mode):
    before = rows()
    calls: list[tuple[dict[str, Any], str, str | None]] = [
        ({**A, "query": 5}, "invalid_type", "query"),
        ({**A}, "invalid", "query"),  # missing
        ({**A, "query": "x", "top_k": "3"}, "invalid_type", "top_k"),
        ({**A, "query": "x", "top_k": 999}, "invalid", "top_k"),
        ({**A, "query": "x", "colour": "red"}, "unknown_field", "colour"),
        ({**A, "query": "x", "time_after": "yesterday"}, "invalid_type", "time_after"),
        ({**A, "query": "x", "statuses": ["gone"]}, "invalid", "statuses"),
        ({**A, "query": "x" * 5000}, "invalid", "query"),
        ({**A, "query": "nul \x00"}, "invalid", "query"),
        ({"bot_uuid": "", "session_name": "g", "query": "x"}, "invalid", "bot_uuid"),
        ({"bot_uuid": "bot-a", "session_name": " ", "query": "x"}, "invalid", "session_name"),
        ({**A, "isolation": "world", "query": "x"}, "invalid", "isolation"),
    ]

    async def scenario(client):
        recall = [error_of(await client.call_tool("recall", arguments)) for arguments, _, _ in calls]
        others = [
            error_of(await client.call_tool("remember", {**A, "content": "x", "importance": 2.5})),
            error_of(await client.call_tool("remember", {**A, "content": "   "})),
            error_of(await client.call_tool("remember", {**A, "content": "x", "tags": "home"})),
            error_of(await client.call_tool("forget", {**A, "episode_id": "not-an-id"})),
            error_of(await client.call_tool("get_profile", {**A, "type": "speaker"})),
            error_of(await client.call_tool("update_profile", {**A, "add_traits": [f"trait {i}" for i in range(30)]})),
            error_of(await client.call_tool("list_sessions", {"limit": 0})),
        ]
        with pytest.raises(MCPError) as unknown:
            await client.call_tool("dream", {})
        return recall, others, unknown.value

    recall, others, unknown = run_client(live_server.url, token[1], mode, scenario)
    assert [(error["code"], error.get("field")) for error in recall] == [(code, field) for _, code, field in calls]
    assert all(error["message"] for error in recall)
    assert [(error["code"], error.get("field")) for error in others] == [
        ("invalid_type", "importance"),  # 2.5; a whole number outside 1-5 is stored clamped
        ("invalid", "content"),
        ("invalid_type", "tags"),
        ("not_found", None),
        ("invalid", "sender_id"),
        ("invalid", "traits"),
        ("invalid", "limit"),
    ]
    assert "unknown tool 'dream'" in unknown.message
    assert rows() == before


def leaves(error: BaseException) -> list[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in leaves(inner)]
    return [error]


def _post(url: str, body: Any, secret: str | None = None, path: str = "/mcp", **headers: str) -> httpx.Response:
    if secret:
        headers["Authorization"] = f"Bearer {secret}"
    return httpx.post(
        f"{url}{path}",
        json=body,
        headers={"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25", **headers},
        timeout=60,
    )


CALL = {
    "jsonrpc": "2.0",
    "id": 7,
    "method": "tools/call",
    "params": {"name": "recall", "arguments": {**A, "query": 5}},
}


def test_it_answers_tool_errors_with_http_200_and_json_never_5xx(live_server, token):
    response = _post(live_server.url, CALL, token[1])
    assert response.status_code == 200
    assert response.headers["Content-Type"].startswith("application/json")  # never an SSE stream
    assert response.headers["Cache-Control"] == "no-store"
    assert "Mcp-Session-Id" not in response.headers  # stateless
    answer = response.json()
    assert answer["id"] == 7 and answer["result"]["isError"] is True
    assert answer["result"]["structuredContent"]["error"]["field"] == "query"

    malformed = httpx.post(
        f"{live_server.url}/mcp",
        content=b'{"jsonrpc": "2.0", "id": 1, "method": ',
        headers={"Authorization": f"Bearer {token[1]}", "Content-Type": "application/json", "Accept": "*/*"},
    )
    assert malformed.status_code == 400 and malformed.json()["error"]["code"] == -32700
    deeper = httpx.post(
        f"{live_server.url}/mcp",
        content=b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": ' + b"[" * 5000 + b"]" * 5000 + b"}}",
        headers={"Authorization": f"Bearer {token[1]}", "Content-Type": "application/json", "Accept": "*/*"},
    )
    assert deeper.status_code == 400  # nested too deep for the parser: a client error, not a crash
    lone_surrogate = httpx.post(  # JSON can escape one; the official client cannot send it
        f"{live_server.url}/mcp",
        content=b'{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "recall", "arguments": '
        b'{"bot_uuid": "bot-a", "session_name": "g", "query": "lone \\ud800"}}}',
        headers={"Authorization": f"Bearer {token[1]}", "Content-Type": "application/json", "Accept": "*/*"},
    )
    assert lone_surrogate.status_code == 400  # refused by the SDK's parser, as the JSON API refuses it
    assert lone_surrogate.json()["error"]["code"] == -32700


def test_it_requires_a_bot_token(live_server, token, mode):
    missing = _post(live_server.url, CALL)
    assert missing.status_code == 401 and missing.headers["WWW-Authenticate"] == "Bearer"
    assert missing.json()["error"]["message"] == "send 'Authorization: Bearer <token>'"
    unknown = _post(live_server.url, CALL, "mct_nope")
    assert unknown.status_code == 401 and "invalid_token" in unknown.headers["WWW-Authenticate"]
    assert _post(live_server.url, CALL, "mct_nope", Authorization="Basic eDp5").status_code == 401

    async def scenario(client):
        return await client.list_tools()

    with pytest.raises(BaseExceptionGroup) as refused:  # the official client gives up, saying why
        run_client(live_server.url, "mct_nope", mode, scenario)
    assert [str(error) for error in leaves(refused.value)] == ["the token is unknown or revoked"]


def test_it_refuses_a_page_of_another_origin_and_admits_its_own(live_server, token, settings):
    """The transport's rule against DNS rebinding: a browser page elsewhere may not call the server."""
    refused = _post(live_server.url, CALL, token[1], Origin="http://evil.example")
    assert refused.status_code == 403 and refused.json()["error"]["code"] == -32600
    assert _post(live_server.url, CALL, token[1], Origin=live_server.url).status_code == 200  # its own host
    settings.CSRF_TRUSTED_ORIGINS = ["https://console.example.org"]
    assert _post(live_server.url, CALL, token[1], Origin="https://console.example.org").status_code == 200
    assert _post(live_server.url, CALL, token[1]).status_code == 200  # no browser, no Origin


def test_it_answers_get_and_delete_with_405(live_server, token):
    for method in ("GET", "DELETE", "PUT"):
        response = httpx.request(method, f"{live_server.url}/mcp", headers={"Authorization": f"Bearer {token[1]}"})
        assert response.status_code == 405 and response.headers["Allow"] == "POST"


def test_it_shares_the_api_rate_limit_with_retry_after(live_server, token, settings):
    settings.MEMCONSOLE_API_RATE_PER_MINUTE = 1
    if timezone.now().second >= 57:  # both requests in one clock minute
        time.sleep(4)
    assert _post(live_server.url, CALL, token[1]).status_code == 200
    limited = _post(live_server.url, CALL, token[1])
    assert limited.status_code == 429 and 1 <= int(limited.headers["Retry-After"]) <= 60
    assert limited.json()["error"]["message"].startswith("at most 1 requests a minute per token")


def test_it_refuses_a_body_over_the_api_limit(live_server, token, settings):
    settings.MEMCONSOLE_API_MAX_BODY_BYTES = 2048
    big = {**CALL, "params": {"name": "remember", "arguments": {**A, "content": "x" * 4000}}}
    assert _post(live_server.url, big, token[1]).status_code == 413


def test_it_refuses_a_batch_in_plain_words(live_server, token):
    batch = [{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}]
    response = _post(live_server.url, batch, token[1])
    assert response.status_code == 400 and response.headers["Content-Type"] == "application/json"
    message = response.json()["error"]["message"]
    assert message == "send one JSON-RPC message per request (batches are not supported)"


def test_it_answers_a_transport_refusal_as_a_json_rpc_error(live_server, token):
    """What the SDK refuses itself (a body sent as text/plain) comes back in the JSON-RPC error
    shape of every other refusal, not as a text page."""
    response = _post(live_server.url, CALL, token[1], **{"Content-Type": "text/plain"})
    assert response.status_code == 400 and response.headers["Content-Type"] == "application/json"
    assert "Content-Type" in response.json()["error"]["message"], response.text


def test_it_answers_at_the_path_with_a_trailing_slash_too(live_server, token):
    listed = _post(live_server.url, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, token[1], path="/mcp/")
    assert listed.status_code == 200 and listed.headers["Content-Type"].startswith("application/json")
    assert "remember" in {tool["name"] for tool in listed.json()["result"]["tools"]}


def test_it_never_holds_a_worker_with_an_event_stream(live_server, token):
    sse_only = _post(live_server.url, CALL, token[1], Accept="text/event-stream")
    assert sse_only.status_code == 406  # it answers JSON only, and says so
    listen = {"jsonrpc": "2.0", "id": 3, "method": "subscriptions/listen", "params": {}}
    handshake_era = _post(live_server.url, listen, token[1])
    assert handshake_era.json()["error"]["message"] == "Method not found"
    modern = _post(live_server.url, listen, token[1], **{"MCP-Protocol-Version": "2026-07-28"})
    assert modern.status_code == 406  # a listen answer is a stream, so it is refused rather than streamed


def test_it_answers_an_unavailable_index_with_a_tool_error(live_server, token, monkeypatch, mode):
    def down(*args: Any, **kwargs: Any) -> None:
        raise VectorIndexUnavailable("connection refused by chroma at 10.0.0.7", "vector_index")

    monkeypatch.setattr("memconsole.memory.retrieval.recall", down)

    async def scenario(client):
        return error_of(await client.call_tool("recall", {**A, "query": "x"}))

    assert run_client(live_server.url, token[1], mode, scenario) == {
        "code": "unavailable",
        "message": "the vector index is unavailable; retry later",  # the API's words, not the index's
    }
